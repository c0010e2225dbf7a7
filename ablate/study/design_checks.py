"""The checks of a study's inference design, what the report will conclude from: the eval's sample
of the task, A/A replicates and their seeds, the findings it declares, the equivalence margin,
the primary family, sequential looks and the positive control; and what the trials' length
makes of the arms (a rollout staleness never reached). Each
returns readable problems (or warnings); `ablate.study.checks` runs them with the checks of the
study's pieces.

Like those, they read a `Study` through its attributes and import nothing from `ablate.study`'s
study module, which imports them.
"""

from __future__ import annotations

import functools
from typing import Any, TypeAlias

from ablate.base.errors import AblateError
from ablate.factors.finding import Finding
from ablate.study.controls import control_problems, control_seed_warnings

#: An `ablate.study.Study` (not imported: study imports this module).
Study: TypeAlias = Any

#: Fewer eval problems than this and the task-level reading rests on a small sample of the task.
MIN_EVAL_PROBLEMS = 256


def eval_problem_count(study: Study) -> int | None:
    """How many eval problems each eval reads: the declared J or the whole split (None when the
    task cannot be built, which the task check reports)."""
    options = tuple(sorted(study.task_options.items()))
    try:
        split = _eval_split_size(study.task, options)
    except TypeError:  # an unhashable option value: not cached
        split = _eval_split_size.__wrapped__(study.task, options)
    declared = study.eval.max_problems
    return None if split is None else split if declared is None else min(declared, split)


@functools.lru_cache(maxsize=32)
def _eval_split_size(task: str, options: tuple) -> int | None:
    """The task's eval split size, built once per process: generating a synthetic split costs
    ~0.3 s, and every `Study` (and every `dataclasses.replace` of one) checks it."""
    from ablate.tasks import get_task

    try:
        return len(get_task(task, **dict(options)).problems("eval"))
    except AblateError:
        return None


def eval_size_warnings(study: Study) -> list[str]:
    count = eval_problem_count(study)
    if count is None or count >= MIN_EVAL_PROBLEMS:
        return []
    return [
        f"each eval reads {count} problems of {study.task}'s eval split: the report treats them "
        f"as a sample of the task, and below {MIN_EVAL_PROBLEMS} problems its intervals are wide "
        "(use the whole split: EvalSpec(max_problems=None), or more problems)"
    ]


#: An A/A check on fewer seeds than this rarely fails even when the pipeline is miscalibrated.
MIN_AA_SEEDS = 5


def control_warnings(study: Study) -> list[str]:
    """A/A replicates on too few seeds; positive and graded controls off the contrasts' seeds."""
    seeds: dict[str, set] = {}
    for arm, _, _, seed in study.cells():
        seeds.setdefault(arm, set()).add(seed)
    return [
        f"A/A replicate {a.name!r} runs {len(seeds.get(a.name, ()))} seeds: the check needs at "
        f"least {MIN_AA_SEEDS} (add seeds, e.g. Cells(arms=[{a.name!r}, {a.replicate_of!r}], "
        "seeds=[...]))"
        for a in study.arms
        if a.replicate_of and len(seeds.get(a.name, ())) < MIN_AA_SEEDS
    ] + control_seed_warnings(study)


def replicate_problems(study: Study) -> list[str]:
    names = {a.name: a for a in study.arms}
    out = []
    for a in study.arms:
        if a.replicate_of is None:
            continue
        original = names.get(a.replicate_of)
        if original is None or original.replicate_of is not None or original.name == a.name:
            out.append(
                f"arm {a.name!r}: replicate_of={a.replicate_of!r} must name another arm that is "
                "not itself a replicate"
            )
            continue
        try:
            diff = sorted(a.algorithm.diff(original.algorithm))
        except AblateError:
            continue  # reported by the arm checks (`ablate.study.checks`)
        if diff:
            out.append(
                f"arm {a.name!r} is a replicate of {original.name!r} but its algorithm differs in "
                f"{diff}: write arm({a.name!r}, replicate_of={original.name!r}) without a base"
            )
    ref = names.get(study.reference_arm) if study.arms else None
    if ref is not None and ref.replicate_of is not None:
        out.append(f"the reference arm {ref.name!r} must not be a replicate")
    return out


def finding_problems(study: Study) -> list[str]:
    """A study declares the findings it tests: each names this study, once, and both its arms
    have trials on its base model and template."""
    cells = {(a, model, template) for a, model, template, _ in study.cells()}
    out, seen = [], set()
    for f in study.findings:
        if not isinstance(f, Finding):
            out.append(f"findings: {f!r} is not a Finding(...)")
            continue
        if f.id in seen:
            out.append(f"finding {f.id!r} is declared twice")
        seen.add(f.id)
        if f.study != study.name:
            out.append(f"finding {f.id!r}: study={f.study!r}, but study {study.name!r} declares it")
        for role, name in (("arm", f.arm), ("reference", f.reference)):
            if (name, f.model, f.template) not in cells:
                out.append(
                    f"finding {f.id!r}: {role}={name!r} has no trials on base model "
                    f"{f.model!r} with template {f.template!r}"
                )
    return out


SPENDING = ("obrien_fleming", "pocock")
PRIMARY = ("equal steps", "equal tokens")


def design_problems(study: Study) -> list[str]:
    """The inference design: margin, primary family, sequential looks, the controls."""
    out = []
    margin = study.equivalence_margin
    if margin is not None and not (isinstance(margin, int | float) and 0 < margin < 1):
        out.append(f"equivalence_margin={margin!r} must be a Δ pass@1 in (0, 1) or None")
    if study.primary not in PRIMARY:
        out.append(f"primary={study.primary!r} must be one of {', '.join(map(repr, PRIMARY))}")
    if study.spending not in SPENDING:
        out.append(f"spending={study.spending!r} must be one of {', '.join(map(repr, SPENDING))}")
    looks = list(study.looks)
    if looks:
        if not all(isinstance(k, int) and not isinstance(k, bool) for k in looks):
            out.append(f"looks={tuple(looks)!r} must be seed counts (ints)")
        elif looks != sorted(set(looks)) or looks[0] < 3 or looks[-1] > len(study.seeds):
            out.append(
                f"looks={tuple(looks)!r} must increase, start at 3 or more seeds and end at most "
                f"at the study's {len(study.seeds)} seeds"
            )
    return out + control_problems(study)


def staleness_problems(study: Study) -> list[str]:
    """An arm whose `rollout_staleness` is not below the steps of its trials (or of its tuning
    trials): a trial syncs the sampler once per step, so its sampler would never take the
    trainer's weights and the declared lag is never reached."""
    lengths = {"Budget.max_steps": study.budget.max_steps}
    lengths["TuneSpec.steps"] = getattr(study.tune, "steps", None)
    out = []
    for a in study.arms:
        try:
            k = a.algorithm.rollout_staleness
        except AblateError:
            continue  # reported by the arm checks
        for field, steps in lengths.items():
            if isinstance(steps, int) and isinstance(k, int) and 0 < steps <= k:
                out.append(
                    f"arm {a.name!r}: rollout_staleness={k:,} is not below {field}={steps:,}: "
                    "a trial syncs its sampler once per step, so the sampler would never take "
                    f"the trainer's weights; use a staleness of at most {steps - 1:,} (or more "
                    "steps)"
                )
                break
    return out
