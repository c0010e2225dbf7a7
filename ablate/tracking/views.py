"""What a study looks like in the MLflow UI (3.x): its experiment marked as model training, and a
saved view of its runs that `ablate ui` links to.

MLflow 3.17's UI opens an experiment on the GenAI "Overview" (traces) unless its GenAI / Model
training switch is on Model training: the switch is per browser and is also set by the URL
parameter `workflowType=machine_learning`. The experiment tag `mlflow.experimentKind`
(`custom_model_development`) says the same for MLflow builds that read it.

The view is a shared view state: an experiment tag `mlflow.sharedViewState.<key>` holding the
runs page's state as JSON, opened by the URL parameter `viewStateShareKey=<key>`. Ours shows the
study's runs grouped by arm (and base model / template where they vary) with their average,
each trial run named `arm | model | template | seed N`, and as columns the headline metrics,
the Algorithm fields that differ between the arms and the trial tags; its charts open on the
headline curves.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ablate.tracking import (
    CURRENT,
    EXPERIMENT_TAGS,
    KIND,
    STUDY,
    TRIAL,
    _all_pages,
    _client,
    _quoted,
    _search,
)

VIEW_TAG = "mlflow.sharedViewState."
#: On the parent run: the trial runs carry CURRENT (results written before it do not).
PLAN_MARKED = "ablate.plan_marked"
#: Metrics shown first, when the runs logged them: the last logged value is the final eval.
HEADLINE = (
    "eval/pass_at_1",
    "reward/mean",
    "entropy/mean",
    "length/mean",
    "policy/clip_frac",
    "budget/generated_tokens",
    "budget/wall_seconds",
)
CHARTS = ("eval/pass_at_1", "reward/mean", "entropy/mean", "length/mean")
TRIAL_TAGS = ("ablate.arm", "ablate.seed", "ablate.model", "ablate.template", "ablate.outcome")
#: Parameter groups that can differ between arms (a column when they do).
VARYING = ("algo.", "optim.", "budget.", "eval.")
SECTION = "ablate-headline"


ML = "workflowType=machine_learning"


@dataclass(frozen=True)
class StudyView:
    study: str
    experiment_id: str
    key: str
    run_id: str  # the study's parent run
    has_report: bool = False  # its artifacts hold report/report.html

    def url(self, base: str, *, charts: bool = False) -> str:
        """The study's runs page in the UI at `base` (e.g. http://127.0.0.1:5000)."""
        mode = "&compareRunsMode=CHART" if charts else ""
        runs = f"{base.rstrip('/')}/#/experiments/{self.experiment_id}/runs"
        return f"{runs}?{ML}&viewStateShareKey={self.key}{mode}"

    def report_url(self, base: str) -> str:
        """The study's HTML report, shown by the UI as an artifact of the parent run."""
        run = f"{base.rstrip('/')}/#/experiments/{self.experiment_id}/runs/{self.run_id}"
        return f"{run}/artifacts/report/report.html?{ML}"


def view_key(study: str) -> str:
    return "ablate-" + re.sub(r"[^A-Za-z0-9_-]", "-", study)


def _column(kind: str, key: str) -> str:
    return f"{kind}.`{key}`"


def _varying_params(runs: list[Any]) -> list[str]:
    keys = sorted({k for r in runs for k in r.data.params if k.startswith(VARYING)})
    return [k for k in keys if len({r.data.params.get(k) for r in runs}) > 1]


def _metrics(runs: list[Any]) -> list[str]:
    logged = {k for r in runs for k in r.data.metrics}
    ks = [k for k in logged if re.fullmatch(r"eval/pass_at_\d+", k) and k != HEADLINE[0]]
    ks.sort(key=lambda k: int(k.rsplit("_", 1)[1]))
    return [k for k in (HEADLINE[0], *ks, *HEADLINE[1:]) if k in logged]


def _line_chart(metric: str) -> dict[str, Any]:
    return {
        "uuid": f"ablate-{metric.replace('/', '-')}",
        "type": "LINE",
        "runsCountToCompare": 10,
        "metricSectionId": SECTION,
        "deleted": False,
        "isGenerated": False,
        "displayName": metric,
        "metricKey": metric,
        "selectedMetricKeys": [metric],
        "lineSmoothness": 0,
        "xAxisKey": "step",
        "xAxisScaleType": "linear",
        "scaleType": "linear",
        "selectedXAxisMetricKey": "",
        "yAxisKey": "METRIC",
        "yAxisExpressions": [],
        "ignoreOutliers": False,
        "useGlobalXaxisKey": True,
        "useGlobalLineSmoothing": True,
        "range": {},
    }


def mark_plan(study: Any, trial_ids: set[str]) -> int:
    """Tag every trial run of `study` (an `MLflowStudy`) with whether its trial is in the plan
    `trial_ids`; the number tagged "false" (the runs of trials an edited study dropped)."""
    dropped = 0
    for run in study._trial_runs():
        current = "true" if run.data.tags.get(TRIAL) in trial_ids else "false"
        dropped += current == "false"
        if run.data.tags.get(CURRENT) != current:
            study._client.set_tag(run.info.run_id, CURRENT, current)
    study.set_tags({PLAN_MARKED: "true", CURRENT: "true"})  # the parent stays in the view
    return dropped


def _study_filter(study: str, plan_marked: bool) -> str:
    where = f"tags.`{STUDY}` = {_quoted(study)}"
    return where + (f" and tags.`{CURRENT}` = 'true'" if plan_marked else "")


def _runs_filter(study: str, plan_marked: bool) -> str:
    return f"tags.`{KIND}` = 'trial' and {_study_filter(study, plan_marked)}"


def view_state(study: str, runs: list[Any], *, plan_marked: bool = False) -> dict[str, Any]:
    """The runs page's state for `study`, whose trial runs are `runs` (MLflow Run objects)."""
    metrics = _metrics(runs)
    columns = [_column("metrics", k) for k in metrics]
    columns += [_column("params", k) for k in _varying_params(runs)]
    columns += [_column("tags", k) for k in TRIAL_TAGS]
    groups = [{"mode": "tag", "groupByData": "ablate.arm"}]
    for tag in ("ablate.model", "ablate.template"):
        if len({r.data.tags.get(tag) for r in runs}) > 1:
            groups.append({"mode": "tag", "groupByData": tag})
    charts = [_line_chart(k) for k in CHARTS if k in metrics]
    section = {"uuid": SECTION, "name": "Headline (ablate)", "display": True, "deleted": False}
    return {
        "searchFilter": _study_filter(study, plan_marked),
        "orderByKey": "tags.`mlflow.runName`",  # arm | model | template | seed N
        "orderByAsc": True,
        "selectedColumns": columns,
        "columnOrder": ["attributes.`Run Name`", *columns, "runDateAndNestInfo", "duration"],
        "columnWidths": {"attributes.`Run Name`": 280},
        "runsHiddenMode": "SHOW_ALL",
        "groupBy": {"aggregateFunction": "average", "groupByKeys": groups},
        "useGroupedValuesInCharts": True,
        "compareRunSections": [{**section, "isReordered": False, "isGenerated": False}],
        "compareRunCharts": charts,
        "isAccordionReordered": True,  # the headline section first, the generated ones after
    }


def publish_view(uri: str, study: str) -> StudyView | None:
    """Write the view of `study` on its experiment (from the runs it has now); None when the
    store holds no such study."""
    client = _client(uri)
    experiments = _all_pages(lambda t: client.search_experiments(page_token=t))
    ids = [e.experiment_id for e in experiments]
    parents = _search(client, ids, f"tags.`{KIND}` = 'study' and tags.`{STUDY}` = {_quoted(study)}")
    if not parents:
        return None
    experiment_id = parents[0].info.experiment_id
    plan_marked = parents[0].data.tags.get(PLAN_MARKED) == "true"
    runs = _search(client, [experiment_id], _runs_filter(study, plan_marked))
    state = view_state(study, runs, plan_marked=plan_marked)
    key = view_key(study)
    client.set_experiment_tag(experiment_id, VIEW_TAG + key, json.dumps(state))
    mark_model_training(client, experiment_id)
    run_id = parents[0].info.run_id
    report = "report/report.html" in {a.path for a in client.list_artifacts(run_id, "report")}
    return StudyView(study, experiment_id, key, run_id, report)


def publish_views(uri: str) -> list[StudyView]:
    """The view of every study in the store, written now (oldest study first)."""
    client = _client(uri)
    experiments = _all_pages(lambda t: client.search_experiments(page_token=t))
    ids = [e.experiment_id for e in experiments]
    parents = _search(client, ids, f"tags.`{KIND}` = 'study'") if ids else []
    names = dict.fromkeys(r.data.tags[STUDY] for r in parents if STUDY in r.data.tags)
    return [v for name in names if (v := publish_view(uri, name)) is not None]


def mark_model_training(client: Any, experiment_id: str) -> None:
    """Tag the experiment as model training (not GenAI) unless it says otherwise already:
    experiments created before ablate set the tag at creation."""
    experiment = client.get_experiment(experiment_id)
    for key, value in EXPERIMENT_TAGS.items():
        if key not in experiment.tags:
            client.set_experiment_tag(experiment_id, key, value)
