"""A new results store touches two files: its module (a class with the core `StudyStore` port)
and one `register_store` line naming its URL scheme. Here a throwaway store, kept in a folder by
the file store under a made-up scheme, is defined and registered in this test file alone: `ablate
run` trains a study into it, resumes nothing twice, and the runs read back through the port;
its leases, failures and UI, which it does not declare, fall back to the defaults (leases in the
results folder, only the disk's failures, no UI: `ablate ui` says so in one line). A scheme no
store serves is one line naming those that are served."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ablate.base.errors import ConfigError
from ablate.base.store.leases import LeasePort
from ablate.base.store.port import StoreFailures, StudyRun
from ablate.base.store.table import RunTable
from ablate.base.store.ui import HasUI
from ablate.commands.cli import main
from ablate.study import load_study
from ablate.study.identity import identified_trials
from ablate.testing import exactly_once_problems, one_error, study_ledger, zoo_model_built
from ablate.tracking import STORES, StudyStore, leases_of, open_store, register_store, ui_of
from ablate.tracking.files import FileStore

ROOT = Path(__file__).resolve().parent.parent
SCHEME = "throwaway"


class ThrowawayStore:
    """The core port and nothing more, its runs kept by the file store in the URI's folder."""

    kind = "throwaway store"

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._files = FileStore("jsonl://" + uri.removeprefix(f"{SCHEME}://"))

    def init(self) -> None:
        self._files.init()

    def exists(self) -> bool:
        return self._files.exists()

    def write_problem(self) -> str | None:
        return self._files.write_problem()

    def open_study(self, name: str, *, experiment: str | None = None) -> StudyRun:
        return self._files.open_study(name, experiment=experiment)

    def find_study(self, name: str) -> StudyRun | None:
        return self._files.find_study(name)

    def runs(self, study_name: str) -> RunTable:
        return self._files.runs(study_name)

    def metric_history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        return self._files.metric_history(run_id, key)

    def metric_rows_per_step(self, run_id: str, key: str) -> dict[int, int]:
        return self._files.metric_rows_per_step(run_id, key)

    def list_artifacts(self, run_id: str, path: str | None = None) -> list[str]:
        return self._files.list_artifacts(run_id, path)

    def download_artifacts(self, run_id: str, path: str, dst: str | Path) -> Path:
        return self._files.download_artifacts(run_id, path, dst)


@pytest.fixture
def throwaway(monkeypatch, tmp_path) -> str:
    """The one registration (the registry's table is a copy, restored after the test); the
    URI of a store of the new scheme."""
    monkeypatch.setattr(STORES, "_openers", dict(STORES._openers))
    register_store(SCHEME, ThrowawayStore)
    return f"{SCHEME}://{tmp_path / 'store'}"


def test_the_scheme_opens_the_new_store_with_the_core_port_only(throwaway, tmp_path):
    store = open_store(throwaway)
    assert isinstance(store, ThrowawayStore) and isinstance(store, StudyStore)
    assert not any(isinstance(store, cap) for cap in (LeasePort, StoreFailures, HasUI))
    assert ui_of(store) is None
    assert leases_of(store, tmp_path / "results").url == (
        f"sqlite:///{(tmp_path / 'results').resolve()}/leases.db"
    )
    assert not store.exists() and list(tmp_path.iterdir()) == []  # opening touches nothing
    with pytest.raises(ValueError, match="registered twice"):
        register_store(SCHEME, ThrowawayStore)
    library = [p for p in (ROOT / "ablate").rglob("*.py") if SCHEME in p.read_text()]
    assert library == []  # the library knows nothing of it


def test_an_unknown_scheme_is_one_line_naming_the_served_ones(throwaway):
    with pytest.raises(ConfigError) as err:
        open_store("nosuch:///tmp/x")
    message = str(err.value)
    assert message.startswith("results store 'nosuch:///tmp/x': no store serves 'nosuch' URIs")
    assert "\n" not in message
    for served in ("jsonl://", "sqlite://", "postgresql://", "http://", f"{SCHEME}://"):
        assert served in message
    with pytest.raises(ConfigError, match="it has no scheme"):
        open_store("results/mlflow.db")


def test_an_unknown_scheme_in_the_cli_is_one_line_before_anything_is_written(tmp_path, capsys):
    study = _write(tmp_path)
    assert main(["run", str(study), "--results", str(tmp_path / "r"), "--tracking-uri", "x:/"])
    assert one_error(capsys).startswith("error: results store 'x:/': no store serves 'x' URIs")
    assert not (tmp_path / "r").exists()


def test_ablate_ui_on_a_store_without_a_ui_is_one_line(throwaway, tmp_path, capsys):
    assert main(["ui", "--tracking-uri", throwaway]) == 2
    error = one_error(capsys)
    assert error.startswith("error: ablate ui needs an MLflow database")
    assert "throwaway store" in error and not (tmp_path / "store").exists()


STUDY = """
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="fresh",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0)],
    seeds=[0, 1],
    budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=12),
    eval=EvalSpec(every=1, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
)
"""


def _write(folder: Path) -> Path:
    path = folder / "study.py"
    path.write_text(textwrap.dedent(STUDY))
    return path


@pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo not available")
@pytest.mark.filterwarnings("ignore::ablate.base.errors.StudyWarning")
def test_ablate_run_trains_a_study_into_the_new_store_and_reads_it_back(
    throwaway, tmp_path, capsys
):
    study_file, results = _write(tmp_path), tmp_path / "results"
    run = ["run", str(study_file), "--results", str(results), "--tracking-uri", throwaway]
    assert main(run) == 0
    assert f"throwaway store: {throwaway}" in capsys.readouterr().out
    assert main(run) == 0  # a rerun finds every trial FINISHED: nothing trained twice

    store = open_store(throwaway)
    ids = [t.id for t in identified_trials(load_study(study_file))]
    table = store.runs("fresh")
    assert sorted(table.runs["trial_id"]) == sorted(ids)
    assert set(table.runs["status"]) == {"FINISHED"} and set(table.runs["arm"]) == {"grpo"}
    ledger = study_ledger(throwaway, "fresh")
    assert exactly_once_problems(ledger, ids, [1, 2], "reward/mean") == []
    run_id = table.runs["run_id"].iloc[0]
    assert [step for step, _ in store.metric_history(run_id, "reward/mean")] == [1, 2]
    assert "config.json" in store.list_artifacts(run_id)
    # the leases were taken where a store without its own place keeps them, and all released
    assert (results / "leases.db").is_file() and not (tmp_path / "store" / "leases.db").exists()
    leases = leases_of(store, results)
    assert all(leases.holder(f"fresh/{trial_id}") is None for trial_id in ids)
