"""What a study looks like in the MLflow UI (3.x): its experiment marked as model training, and a
saved view of its runs that `ablate ui` links to.

MLflow 3.17's UI opens an experiment on the GenAI "Overview" (traces) unless its GenAI / Model
training switch is on Model training: the switch is per browser and is also set by the URL
parameter `workflowType=machine_learning`. The experiment tag `mlflow.experimentKind`
(`custom_model_development`) says the same for MLflow builds that read it.

The view is a shared view state: an experiment tag `mlflow.sharedViewState.<key>` holding the
runs page's state as JSON, opened by the URL parameter `viewStateShareKey=<key>`. Ours shows the
study's finished runs grouped by cell (`arm | model | template`: an arm's seeds on one base
model, never arms of different bases averaged together) with their average, each trial run
named `arm | model | template | seed N`, and as columns the headline metrics, the Algorithm
fields that differ between the arms and the trial tags; its charts open on the headline
curves. Each trial run carries its arm's colour (`mlflow.runColor`, the report's palette), and
the experiment's description says how to read the view.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ablate.base.palette import arm_color
from ablate.base.store.tags import (
    ARM,
    ARMS,
    CELL,
    CURRENT,
    MODEL,
    OUTCOME,
    PLAN_MARKED,
    SEED,
    STUDY,
    TEMPLATE,
)
from ablate.base.store.ui import StudyPage
from ablate.tracking.mlflow_client import (
    EXPERIMENT_TAGS,
    all_experiments,
    client,
    parent_filter,
    search,
    sqlite_path,
    study_filter,
    trial_filter,
)

VIEW_TAG = "mlflow.sharedViewState."
RUN_COLOR = "mlflow.runColor"
DESCRIPTION = "mlflow.note.content"  # the experiment's description in the UI
#: Only runs that ended (finished or diverged): a running trial's partial metrics would enter
#: its cell's average; failed and killed runs are the report's "trials that did not finish".
ENDED = "attributes.status = 'FINISHED'"
READING = (
    "ablate results. Each study's link (printed by `ablate ui`) opens its runs grouped by cell "
    "(arm | base model | template): a group's values are the mean over its finished seeds of the "
    "last logged value, e.g. the final eval pass@1. Running, failed and killed runs are hidden "
    "(clear the `attributes.status` filter to see them). Each arm has its report colour. These "
    "averages are descriptive: the study's report (its second link) holds the contrasts, their "
    "intervals and verdicts. Studies here: {studies}."
)
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
TRIAL_TAGS = (ARM, SEED, MODEL, TEMPLATE, OUTCOME)
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


def _current(plan_marked: bool) -> str:
    return f" and tags.`{CURRENT}` = 'true'" if plan_marked else ""


def view_state(study: str, runs: list[Any], *, plan_marked: bool = False) -> dict[str, Any]:
    """The runs page's state for `study`, whose trial runs are `runs` (MLflow Run objects)."""
    metrics = _metrics(runs)
    columns = [_column("metrics", k) for k in metrics]
    columns += [_column("params", k) for k in _varying_params(runs)]
    columns += [_column("tags", k) for k in TRIAL_TAGS]
    groups = [{"mode": "tag", "groupByData": CELL}]
    charts = [_line_chart(k) for k in CHARTS if k in metrics]
    section = {"uuid": SECTION, "name": "Headline (ablate)", "display": True, "deleted": False}
    return {
        "searchFilter": f"{study_filter(study)}{_current(plan_marked)} and {ENDED}",
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
    api = client(uri)
    ids = all_experiments(api)
    parents = search(api, ids, parent_filter(study)) if ids else []
    if not parents:
        return None
    experiment_id = parents[0].info.experiment_id
    plan_marked = parents[0].data.tags.get(PLAN_MARKED) == "true"
    runs = search(api, [experiment_id], trial_filter(study) + _current(plan_marked))
    annotate_runs(api, runs, _arm_order(parents[0], runs))
    state = view_state(study, runs, plan_marked=plan_marked)
    key = view_key(study)
    api.set_experiment_tag(experiment_id, VIEW_TAG + key, json.dumps(state))
    mark_model_training(api, experiment_id)
    run_id = parents[0].info.run_id
    report = "report/report.html" in {a.path for a in api.list_artifacts(run_id, "report")}
    return StudyView(study, experiment_id, key, run_id, report)


def _arm_order(parent: Any, runs: list[Any]) -> list[str]:
    """The study's arms in declared order (its parent's tag), else in the order they started."""
    declared = parent.data.tags.get(ARMS)
    if declared:
        return json.loads(declared)
    started = sorted(runs, key=lambda r: r.info.start_time or 0)
    return list(dict.fromkeys(r.data.tags[ARM] for r in started if ARM in r.data.tags))


def annotate_runs(api: Any, runs: list[Any], arms: list[str]) -> None:
    """Give each trial run its cell (runs logged before the tag existed) and its arm's colour."""
    colors = {arm: arm_color(i) for i, arm in enumerate(arms)}
    for run in runs:
        tags = run.data.tags
        wanted = {}
        if CELL not in tags and ARM in tags:
            wanted[CELL] = " | ".join(tags.get(t, "?") for t in (ARM, MODEL, TEMPLATE))
        color = colors.get(tags.get(ARM, ""))
        if color is not None and tags.get(RUN_COLOR) != color:
            wanted[RUN_COLOR] = color
        for key, value in wanted.items():
            api.set_tag(run.info.run_id, key, value)
            tags[key] = value  # the view below reads them


def describe_experiment(api: Any, experiment_id: str, studies: list[str]) -> None:
    """The experiment's description: how to read the view (written by `ablate ui`)."""
    text = READING.format(studies=", ".join(studies))
    if api.get_experiment(experiment_id).tags.get(DESCRIPTION) != text:
        api.set_experiment_tag(experiment_id, DESCRIPTION, text)


def publish_views(uri: str) -> list[StudyView]:
    """The view of every study in the store, written now (oldest study first)."""
    api = client(uri)
    ids = all_experiments(api)
    parents = search(api, ids, parent_filter()) if ids else []
    names = dict.fromkeys(r.data.tags[STUDY] for r in parents if STUDY in r.data.tags)
    views = [v for name in names if (v := publish_view(uri, name)) is not None]
    for experiment_id in dict.fromkeys(v.experiment_id for v in views):
        studies = [v.study for v in views if v.experiment_id == experiment_id]
        describe_experiment(api, experiment_id, studies)
    return views


def mark_model_training(api: Any, experiment_id: str) -> None:
    """Tag the experiment as model training (not GenAI) unless it says otherwise already:
    experiments created before ablate set the tag at creation."""
    experiment = api.get_experiment(experiment_id)
    for key, value in EXPERIMENT_TAGS.items():
        if key not in experiment.tags:
            api.set_experiment_tag(experiment_id, key, value)


class MLflowUI:
    """`ablate ui` on an MLflow database: `mlflow server` on it, and each study's saved view."""

    name = "MLflow UI"
    health_path = "/health"  # answers 200 once the server serves (`ablate ui` polls it)

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def command(self, host: str, port: int) -> list[str]:
        import sys

        cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", self.uri]
        path = sqlite_path(self.uri)
        if path is not None:  # where `MLflowStudy` puts a sqlite store's artifacts
            cmd += ["--artifacts-destination", (path.parent / "artifacts").as_uri()]
        cmd += ["--host", host, "--port", str(port)]
        if host not in ("127.0.0.1", "localhost"):
            cmd += ["--allowed-hosts", "*"]
        return cmd

    def publish(self, base_url: str) -> list[StudyPage]:
        """Write each study's saved view of its runs now (oldest study first); their links."""
        pages = []
        for view in publish_views(self.uri):
            report = view.report_url(base_url) if view.has_report else None
            pages.append(StudyPage(view.study, view.url(base_url), report))
        return pages
