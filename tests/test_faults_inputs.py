"""Fault suite, fast set for bad inputs and bad places: every output location refused before
compute, absurd sizes refused naming the field and its limit, each as the README promises (one
line, exit code 2, nothing written)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ablate.commands.cli import main
from ablate.testing import one_error

STUDY = """
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name="inputs",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0)],
    seeds=[0],
    budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
)
"""


@pytest.fixture
def study_file(tmp_path) -> Path:
    path = tmp_path / "inputs.py"
    path.write_text(textwrap.dedent(STUDY))
    return path


@pytest.mark.parametrize("command", ["run", "report"])
def test_an_out_that_is_a_file_is_one_line_before_anything_is_written(
    command, study_file, tmp_path, capsys
):
    results, out = tmp_path / "results", tmp_path / "taken"
    out.write_text("not a folder")
    argv = [command, str(study_file), "--results", str(results), "--out", str(out)]
    assert main(argv) == 2
    line = one_error(capsys)
    assert f"report folder {out.resolve() / 'inputs'} cannot be created" in line
    assert f"{out.resolve()} is a file" in line
    assert not results.exists() and out.read_text() == "not a folder"


@pytest.mark.parametrize("command", ["run", "report"])
def test_an_unwritable_out_is_one_line_naming_it(command, study_file, tmp_path, capsys):
    results = tmp_path / "results"
    argv = [command, str(study_file), "--results", str(results), "--out", "/proc/ablate-out"]
    assert main(argv) == 2  # /proc refuses new files even to root
    line = one_error(capsys)
    assert "report folder /proc/ablate-out/inputs cannot be created in /proc" in line
    assert "pass --out another" in line
    assert not results.exists()


def test_report_folder_of_the_study_being_a_file_is_refused(study_file, tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "reports"
    out.mkdir()
    (out / "inputs").write_text("")
    assert main(["run", str(study_file), "--results", str(results), "--out", str(out)]) == 2
    assert one_error(capsys).endswith(f"{out.resolve() / 'inputs'} is a file: pass --out a folder")
    assert not results.exists()


#: A size a study can give -> words its one-line refusal must hold (the field and its limit).
ABSURD = {
    "max_new_tokens=1e9": ("Budget: max_new_tokens=1000000000.0 must be an integer",),
    "max_new_tokens=10**9": (
        "max_new_tokens=1000000000 leaves no room for a prompt in hopeless's 192 positions",
        "use at most 191",
    ),
    "group_size=10**9": ("Budget: group_size=1000000000 is more than", "group_size <= "),
    "prompts_per_step=10**9": ("prompts_per_step=1000000000 is more than", "prompts_per_step <= "),
    "max_steps='5'": ("Budget: max_steps='5' must be an integer",),
}


@pytest.mark.parametrize("size", list(ABSURD))
def test_an_absurd_size_is_one_line_naming_the_field_and_its_limit(size, tmp_path, capsys):
    study = tmp_path / "absurd.py"
    budget = "max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8"
    text = textwrap.dedent(STUDY).replace(budget, f"**{{**dict({budget}), **dict({size})}}")
    study.write_text(text)
    results, out = tmp_path / "results", tmp_path / "out"
    assert main(["run", str(study), "--results", str(results), "--out", str(out)]) == 2
    line = one_error(capsys)
    assert all(words in line for words in ABSURD[size]), line
    assert not results.exists() and not out.exists()


def test_the_memory_floor_by_hand():
    from ablate.factors.spec import Budget
    from ablate.study.resources import BYTES_PER_TOKEN, size_problems

    assert BYTES_PER_TOKEN == 33
    budget = Budget(prompts_per_step=2, group_size=2, max_new_tokens=10)
    limits = {"positions": 100, "vocab": 10, "hidden_bytes": 0, "weight_bytes": 0}
    # 4 sequences × 10 tokens × 33 bytes + one sequence's logits (10 × 10 × 4 bytes) = 1720
    evals = {"EvalSpec: n_samples": 4}
    assert size_problems(budget, "m", limits, (1720, "RAM"), evals) == []
    (line,) = size_problems(budget, "m", limits, (1719, "RAM"), {"EvalSpec: n_samples": 3})
    # room for (1719 - 400) // 330 = 3 sequences; the field furthest above its default is
    # named (a tie: the first), and at group_size 2 it fits (1319 × 10) // (330 × 20) = 1 prompt
    assert line.startswith("Budget: prompts_per_step=2 is more than RAM can hold")
    assert "= 40 tokens needs at least 1.7 kB" in line and line.endswith("prompts_per_step <= 1")
    (line,) = size_problems(Budget(max_new_tokens=100), "m", limits, None, evals)
    assert line.endswith("m's 100 positions: use at most 99")
    (line,) = size_problems(budget, "m", limits, (1720, "RAM"), {**evals, "PassKSpec: n": 5})
    assert line.startswith("PassKSpec: n=5 is more than RAM can hold") and "at most 4" in line
    (line,) = size_problems(budget, "m", limits, (1720, "RAM"), {**evals, "ElicitSpec: n": 9})
    assert line.startswith("ElicitSpec: n=9 is more than RAM can hold") and "at most 4" in line


def _dead_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_tracking_server_left_down_is_one_line_before_anything_starts(
    study_file, tmp_path, capsys
):
    uri = f"http://127.0.0.1:{_dead_port()}"
    results = tmp_path / "results"
    argv = ["run", str(study_file), "--results", str(results), "--tracking-uri", uri]
    assert main(argv) == 2
    line = one_error(capsys)
    assert line.startswith(f"error: tracking server {uri} does not answer (")
    assert "Connection refused" in line and not results.exists()


def test_a_server_that_stops_answering_is_said_at_its_first_retry(monkeypatch):
    from mlflow.exceptions import MlflowException

    from ablate.tracking.mlflow_client import client
    from ablate.tracking.mlflow_http import TrackingServerWarning, retry_seconds

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "3")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "0")  # MLflow takes integers
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "0")
    assert retry_seconds() == 0
    api = client(f"http://127.0.0.1:{_dead_port()}")
    with pytest.warns(TrackingServerWarning) as said, pytest.raises(MlflowException):
        api.search_experiments()
    assert len(said) == 1  # one warning per outage, not one per retry
    text = str(said[0].message)
    assert "the tracking server stopped answering at " in text
    assert "retrying for up to 0 s (each try waits up to " in text


def test_unset_retries_default_to_about_half_a_minute(monkeypatch):
    from ablate.tracking.mlflow_http import RETRY_DEFAULTS, prepare, retry_seconds

    for name in (*RETRY_DEFAULTS, "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER"):
        monkeypatch.setenv(name, "")  # recorded, so that what `prepare` sets is undone
        monkeypatch.delenv(name)
    # MLflow's own: 7 retries, factor 2, each sleep + up to 1 s of jitter, capped at 120 s
    assert retry_seconds() == 5 + 9 + 17 + 33 + 65 + 120
    prepare("http://127.0.0.1:1")
    assert retry_seconds() == 2 + 4 + 8 + 16 + 4  # 5 retries, factor 1, jitter <= 1 s each
    prepare("sqlite:////tmp/x.db")  # a database keeps MLflow's defaults


HOSTILE_ARM = "<img src=x onerror=alert(1)>"


def test_report_markdown_shows_an_arm_named_like_html_as_text():
    from ablate.report.data.table import Table
    from ablate.report.render.formats import markdown_text, to_markdown

    table = Table(f"{HOSTILE_ARM} vs grpo", [{"arm": HOSTILE_ARM, "Δ": 0.5}], name="t")
    text = to_markdown(table)
    assert "<img" not in text and text.count("&lt;img src=x onerror=alert(1)>") == 2
    assert markdown_text("a|b </b> <!-- c") == "a\\|b &lt;/b> &lt;!-- c"
    assert markdown_text("only k < 3 seeds") == "only k < 3 seeds"  # not a tag: left as is


def test_report_csv_cells_never_start_a_spreadsheet_formula(tmp_path):
    import pandas as pd

    from ablate.report.data.table import Table
    from ablate.report.render.formats import write_table

    arms = ['=HYPERLINK("http://x","y")', "+1+1", "-x", "@SUM(A1)", "grpo", "-0.5"]
    rows = [{"arm": a, "Δ": -0.25} for a in arms]
    _, _, csv = write_table(Table("c", rows, name="t"), tmp_path)
    back = pd.read_csv(csv, dtype=str)
    assert list(back["arm"]) == [f"'{a}" for a in arms[:4]] + ["grpo", "-0.5"]
    assert set(back["Δ"]) == {"-0.25"}  # numbers stay numbers


def test_report_on_a_database_that_is_not_one_is_one_line_naming_it(study_file, tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "out"
    results.mkdir()
    (results / "mlflow.db").write_bytes(bytes(range(256)) * 16)
    assert main(["report", str(study_file), "--results", str(results), "--out", str(out)]) == 2
    line = one_error(capsys)
    assert line.startswith(f"error: {results.resolve() / 'mlflow.db'} is not an SQLite database")
    assert not out.exists()


def test_report_on_a_truncated_database_is_one_line_naming_it(study_file, tmp_path, capsys):
    from ablate import tracking

    results, out = tmp_path / "results", tmp_path / "out"
    uri = tracking.default_uri(results)
    tracking.open_store(uri).init()
    db = results / "mlflow.db"
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])  # a copy cut short
    assert main(["report", str(study_file), "--results", str(results), "--out", str(out)]) == 2
    line = one_error(capsys)
    assert line.startswith(f"error: the results store {uri} cannot be read (DatabaseError: ")
    assert not out.exists()


def test_run_on_a_damaged_lease_database_is_one_line_naming_it(study_file, tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    (results / "leases.db").write_bytes(b"\x00garbage" * 100)
    assert main(["run", str(study_file), "--results", str(results)]) == 2
    line = one_error(capsys)
    assert line.startswith(f"error: {results.resolve() / 'leases.db'} is not an SQLite database")
    assert sorted(p.name for p in results.iterdir()) == ["leases.db"]  # nothing written


def test_a_store_failure_names_the_database_that_failed(tmp_path):
    import sqlite3

    from ablate import tracking
    from ablate.base.errors import StoreError
    from ablate.study.store_failures import lease_errors, store_errors

    store = tracking.open_store(tracking.default_uri(tmp_path))
    leases = tracking.leases_of(store, tmp_path)
    with pytest.raises(StoreError) as raised, lease_errors(leases):
        raise sqlite3.DatabaseError("database disk image is malformed")
    assert str(raised.value).startswith(
        f"the results store cannot be written ({leases.url}: DatabaseError: database disk image "
        "is malformed); the study stopped."
    )
    with pytest.raises(ValueError, match="a bug"), lease_errors(leases):
        raise ValueError("a bug")  # not the database's: raised as it is
    with pytest.raises(StoreError, match=f"\\({store.uri}: OSError: "), store_errors(store):
        raise OSError(28, "No space left on device")
