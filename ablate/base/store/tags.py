"""The one tag vocabulary: every tag ablate writes is under `ablate.`, and spelled only here
(an adapter's own tags, such as MLflow's `mlflow.*`, stay inside that adapter).

Layout every store keeps: one parent run per study (`KIND` = "study", `STUDY`), one run per
trial (`KIND` = "trial", `STUDY`, `TRIAL_ID`). Runs are found again by these tags, never by run
name, so a resumed study or trial reuses its runs.
"""

from __future__ import annotations

KIND = "ablate.kind"  # "study" on a study's parent run, "trial" on a trial's run
STUDY = "ablate.study"
TRIAL_ID = "ablate.trial_id"
#: On a trial run: "false" once the study's plan dropped its trial (an edited study).
CURRENT = "ablate.current"
#: On a parent run: its trial runs carry CURRENT (results written before that do not).
PLAN_MARKED = "ablate.plan_marked"
RESUMES = "ablate.resumes"  # how often a trial's run was reopened after a stop
#: How a trial ended (finished | diverged | failed | pruned) and why: the report's source.
OUTCOME, OUTCOME_MESSAGE = "ablate.outcome", "ablate.outcome_message"
ARM, SEED, MODEL, TEMPLATE = "ablate.arm", "ablate.seed", "ablate.model", "ablate.template"
MODEL_WEIGHTS, TASK, BUDGET = "ablate.model_weights", "ablate.task", "ablate.budget"
REFERENCE_ARM = "ablate.reference_arm"  # on a parent run
#: On a parent run: the study's arms in declared order (JSON), each arm's colour in every view.
ARMS = "ablate.arms"
#: On a trial run: `arm | model | template`, the cell its seeds average over (the UI groups by it).
CELL = "ablate.cell"
#: `DIFF`: one line of the fields an arm changes from the reference; `DIFF_FIELD + name`: each.
DIFF, DIFF_FIELD = "ablate.diff", "ablate.diff."
ALGO_FIELD = "ablate.algo."  # + field name: an Algorithm param mirrored as a tag (UI filters)
GIT_COMMIT, GIT_DIRTY, VERSION = "ablate.git.commit", "ablate.git.dirty", "ablate.version."
TUNE = "ablate.tune."  # + "number" or a searched dimension's name, on a tune trial's run
