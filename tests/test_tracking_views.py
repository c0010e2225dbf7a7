"""The MLflow UI's view of a study (`ablate.tracking.mlflow_views`): the experiment typed as model
training, and a saved view of its runs with the headline metrics, the differing Algorithm fields
and the trial tags as columns, grouped by arm (tests/test_browser.py opens it in Chromium)."""

from __future__ import annotations

import json

import pytest

from ablate.tracking import default_uri, open_store, ui_of
from ablate.tracking.mlflow import MLflowStudy
from ablate.tracking.mlflow_views import EXPERIMENT_TAGS, VIEW_TAG, publish_view, publish_views

pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    uri = default_uri(tmp_path_factory.mktemp("results"))
    open_store(uri).init()
    study = MLflowStudy.open(uri, "views")
    for arm, scale in (("grpo", "group_std"), ("dr_grpo", "none")):
        for seed in (0, 1):
            for model in ("mid", "rl_ready"):
                tags = {"ablate.arm": arm, "ablate.seed": str(seed), "ablate.model": model}
                tags["ablate.template"] = "plain"
                name = f"{arm} | {model} | plain | seed {seed}"
                tracker = study.trial_tracker(f"{arm}-{model}-{seed}", run_name=name, tags=tags)
                params = {"algo.scale": scale, "algo.clip_low": 0.2, "seed": seed}
                tracker.log_params(params)
                tracker.log_metrics({"eval/pass_at_1": 0.5, "eval/pass_at_8": 0.9}, 10)
                tracker.log_metrics({"eval/pass_at_2": 0.7, "perf/step_seconds": 0.1}, 10)
                tracker.close()
    study.close()
    MLflowStudy.open(uri, "other", experiment="views").close()  # a second study, same experiment
    return uri, study


def test_the_experiment_is_model_training_from_its_creation(store):
    from mlflow.tracking import MlflowClient

    uri, study = store
    experiment = MlflowClient(uri).get_experiment(study.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == EXPERIMENT_TAGS["mlflow.experimentKind"]
    assert EXPERIMENT_TAGS == {"mlflow.experimentKind": "custom_model_development"}


def test_view_shows_headline_metrics_differing_fields_and_trial_tags(store):
    from mlflow.tracking import MlflowClient

    uri, study = store
    view = publish_view(uri, "views")
    assert view.experiment_id == study.experiment_id and view.run_id == study.run_id
    assert not view.has_report
    tags = MlflowClient(uri).get_experiment(study.experiment_id).tags
    state = json.loads(tags[VIEW_TAG + view.key])
    columns = state["selectedColumns"]
    metrics = [c for c in columns if c.startswith("metrics.")]
    assert metrics == [f"metrics.`eval/pass_at_{k}`" for k in (1, 2, 8)]  # pass@1 first
    assert "params.`algo.scale`" in columns  # differs between the arms
    assert "params.`algo.clip_low`" not in columns and "params.`seed`" not in columns
    assert "tags.`ablate.arm`" in columns and "tags.`ablate.seed`" in columns
    groups = [g["groupByData"] for g in state["groupBy"]["groupByKeys"]]
    assert groups == ["ablate.cell"]  # one group per arm × base model × template
    assert state["searchFilter"] == (
        "tags.`ablate.study` = 'views' and attributes.status = 'FINISHED'"
    )
    assert [c["metricKey"] for c in state["compareRunCharts"]] == ["eval/pass_at_1"]


def test_each_trial_run_gets_its_cell_and_its_arms_colour_and_the_experiment_says_how_to_read(
    store,
):
    from mlflow.tracking import MlflowClient

    from ablate.base.palette import OKABE_ITO

    uri, study = store
    publish_views(uri)
    api = MlflowClient(uri)
    runs = api.search_runs([study.experiment_id], "tags.`ablate.kind` = 'trial'")
    cells = {r.data.tags["mlflow.runName"]: r.data.tags["ablate.cell"] for r in runs}
    assert cells["dr_grpo | mid | plain | seed 1"] == "dr_grpo | mid | plain"
    assert len(set(cells.values())) == 4  # 2 arms × 2 base models
    colors = {(r.data.tags["ablate.arm"], r.data.tags["mlflow.runColor"]) for r in runs}
    assert colors == {("grpo", OKABE_ITO[0]), ("dr_grpo", OKABE_ITO[1])}  # in the order they ran
    description = api.get_experiment(study.experiment_id).tags["mlflow.note.content"]
    assert "grouped by cell" in description and description.endswith("views, other.")


def test_the_view_hides_a_running_trial_from_its_cells_average(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = default_uri(tmp_path)
    open_store(uri).init()
    study = MLflowStudy.open(uri, "live")
    for seed, close in ((0, True), (1, False)):
        tags = {"ablate.arm": "grpo", "ablate.seed": str(seed), "ablate.model": "rl_ready"}
        tracker = study.trial_tracker(f"t{seed}", run_name=f"seed {seed}", tags=tags)
        tracker.log_metrics({"eval/pass_at_1": 0.5}, 1)
        if close:
            tracker.close()
    study.close()
    view = publish_view(uri, "live")
    api = MlflowClient(uri)
    state = json.loads(api.get_experiment(view.experiment_id).tags[VIEW_TAG + view.key])
    shown = api.search_runs([view.experiment_id], state["searchFilter"])
    assert sorted(r.data.tags.get("ablate.seed", "parent") for r in shown) == ["0", "parent"]


def test_links_open_the_model_training_side_on_the_view(store):
    uri, study = store
    views = publish_views(uri)
    assert [v.study for v in views] == ["views", "other"]
    url = views[0].url("http://127.0.0.1:5000")
    assert url == (
        f"http://127.0.0.1:5000/#/experiments/{study.experiment_id}/runs"
        "?workflowType=machine_learning&viewStateShareKey=ablate-views"
    )
    assert views[0].url("http://h:1", charts=True).endswith("&compareRunsMode=CHART")
    report = views[0].report_url("http://h:1")
    path = f"/runs/{study.run_id}/artifacts/report/report.html"
    assert report.endswith(f"{path}?workflowType=machine_learning")


def test_the_store_ui_serves_the_database_and_links_each_study(store):
    uri, _ = store
    ui = ui_of(open_store(uri))
    cmd = ui.command("0.0.0.0", 5001)
    assert cmd[1:4] == ["-m", "mlflow", "server"] and uri in cmd and "--allowed-hosts" in cmd
    root = uri.removeprefix("sqlite:///").rsplit("/", 1)[0]
    assert f"file://{root}/artifacts" in cmd  # where the study's artifacts are
    pages = ui.publish("http://h:1")
    assert [p.study for p in pages] == ["views", "other"]
    assert pages[0].url == publish_views(uri)[0].url("http://h:1") and pages[0].report_url is None
    assert ui_of(open_store("http://mlflow.example:5000")) is None  # it serves its own


def test_the_view_hides_the_runs_of_trials_an_edited_study_dropped(tmp_path):
    """A study edited between runs (a budget changed: new trial ids) leaves its old trials'
    runs in the store; marking the current plan tags them, and the view filters on the tag.
    Results written before the tag existed keep the unfiltered view."""
    from mlflow.tracking import MlflowClient

    from ablate.base.store.tags import CURRENT

    uri = default_uri(tmp_path)
    store = open_store(uri)
    store.init()
    study = store.open_study("edited")
    for trial_id in ("old-0", "new-0", "new-1"):
        tags = {"ablate.arm": "grpo", "ablate.seed": trial_id[-1]}
        study.trial_tracker(trial_id, run_name=trial_id, tags=tags).close()
    view = publish_view(uri, "edited")  # not marked yet: every run
    tags = MlflowClient(uri).get_experiment(study.experiment_id).tags
    assert json.loads(tags[VIEW_TAG + view.key])["searchFilter"] == (
        "tags.`ablate.study` = 'edited' and attributes.status = 'FINISHED'"
    )

    assert study.mark_plan({"new-0", "new-1"}) == 1
    runs = {r.data.tags["ablate.trial_id"]: r.data.tags[CURRENT] for r in study._trial_runs()}
    assert runs == {"old-0": "false", "new-0": "true", "new-1": "true"}
    study.close()  # the study ended: its parent run (with the report) is in the view
    view = publish_view(uri, "edited")
    state = json.loads(
        MlflowClient(uri).get_experiment(study.experiment_id).tags[VIEW_TAG + view.key]
    )
    assert state["searchFilter"] == (
        "tags.`ablate.study` = 'edited' and tags.`ablate.current` = 'true' "
        "and attributes.status = 'FINISHED'"
    )
    shown = MlflowClient(uri).search_runs([study.experiment_id], state["searchFilter"])
    trials = [r.data.tags["ablate.trial_id"] for r in shown if "ablate.trial_id" in r.data.tags]
    assert sorted(trials) == ["new-0", "new-1"]
    assert study.run_id in {r.info.run_id for r in shown}  # the parent, with the report
    # the summary, the pilot's SD and the report read the current plan only
    assert sorted(store.runs("edited").runs["trial_id"]) == ["new-0", "new-1"]
