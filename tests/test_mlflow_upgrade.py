"""Fault suite, fast set for an MLflow database that holds runs at an older schema: upgraded on
a copy renamed over it when whole (a stop leaves it as it was), and one that an in-place
upgrade (MLflow's own, `mlflow db upgrade`, an older ablate) left half-done named with its
repair, which `ablate repair` does keeping its runs."""

from __future__ import annotations

import contextlib
import re
import shutil
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ablate import tracking
from ablate.base.errors import StoreError
from ablate.commands.cli import main
from ablate.tracking import mlflow_schema

#: What alembic's version bookkeeping says after each migration it runs.
_VERSION_SET = re.compile(r"alembic_version.*?version_num\s*=\s*'(\w+)'|VALUES \('(\w+)'\)")


class Stopped(Exception):
    """What a kill inside a migration's statement leaves, raised instead of dying."""


@contextlib.contextmanager
def stop_after_leftover():
    """Every engine's statements watched: the one after a `CREATE TABLE _alembic_tmp_` stops."""
    import sqlalchemy as sa

    seen: list[str] = []

    def watch(conn, cursor, statement, *rest) -> None:
        if seen and "CREATE TABLE _alembic_tmp_" in seen[-1]:
            raise Stopped(statement[:60])
        seen.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", watch)
    try:
        yield
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", watch)


KILLED_IN_PLACE = """
import os, signal, sys
from pathlib import Path
import sqlalchemy as sa
from ablate.tracking import mlflow_schema

seen = []

def watch(conn, cursor, statement, *rest):
    if seen and "CREATE TABLE _alembic_tmp_" in seen[-1]:
        os.kill(os.getpid(), signal.SIGKILL)
    seen.append(statement)

sa.event.listen(sa.engine.Engine, "before_cursor_execute", watch)
mlflow_schema.migrate(Path(sys.argv[1]))
"""


def runs_named(path: Path, name: str) -> int:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute("SELECT count(*) FROM runs WHERE name = ?", (name,)).fetchone()[0]


def _database(path: Path, revision: str | None) -> Path:
    """A whole database at schema `revision` (None: MLflow's initial tables, as MLflow 1.x
    made them) holding one run named "kept"."""
    from mlflow.store.tracking.dbmodels.initial_models import Base

    engine = mlflow_schema.engine_of(path)
    try:
        Base.metadata.create_all(engine)
    finally:
        engine.dispose()
    if revision is not None:
        mlflow_schema.migrate(path, revision)
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute(
            "INSERT INTO experiments (experiment_id, name, artifact_location, lifecycle_stage) "
            "VALUES (7, 'kept', '/tmp/kept', 'active')"
        )
        db.execute(
            "INSERT INTO runs (run_uuid, name, source_type, status, start_time, "
            "lifecycle_stage, experiment_id) VALUES ('k1', 'kept', 'LOCAL', 'FINISHED', 0, "
            "'active', 7)"
        )
    return path


@pytest.fixture(scope="module")
def older(tmp_path_factory) -> tuple[Path, str]:
    """A whole database at an older schema revision holding one run, and that revision."""

    path = tmp_path_factory.mktemp("older") / "mlflow.db"
    revision = _newest_rebuilding_start(tmp_path_factory.mktemp("scratch") / "mlflow.db")
    return _database(path, revision), revision


def _newest_rebuilding_start(scratch: Path) -> str:
    """The newest revision from which an upgrade to this MLflow's head rebuilds a table (a
    `_alembic_tmp_*` copy), read off one migration of a scratch database: which migrations
    rebuild changes with the MLflow release (3.17's last 3 did, 3.18's do not)."""
    import sqlalchemy as sa
    from mlflow.store.tracking.dbmodels.initial_models import Base

    engine = mlflow_schema.engine_of(scratch)
    try:
        Base.metadata.create_all(engine)
    finally:
        engine.dispose()
    version, start = None, None

    def watch(conn, cursor, statement, *rest) -> None:
        nonlocal version, start
        if "alembic_version" in statement and (found := _VERSION_SET.search(statement)):
            version = found.group(1) or found.group(2)
        elif "CREATE TABLE _alembic_tmp_" in statement:
            start = version

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", watch)
    try:
        mlflow_schema.migrate(scratch)
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", watch)
    assert start is not None, "no migration of this MLflow rebuilds a table"
    return start


def _copy(older, tmp_path) -> Path:
    path = tmp_path / "mlflow.db"
    shutil.copy2(older[0], path)
    return path


def test_an_older_database_holding_runs_is_upgraded_on_a_copy(older, tmp_path):
    path = _copy(older, tmp_path)
    assert mlflow_schema.read_schema(path).version == older[1] != mlflow_schema.head_revision()
    with pytest.warns(mlflow_schema.StoreWarning, match=f"upgrading {path} to this MLflow"):
        mlflow_schema.ensure(path)
    assert mlflow_schema.read_schema(path).version == mlflow_schema.head_revision()
    assert runs_named(path, "kept") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".mlflow.db.lock", "mlflow.db"]


def test_a_stop_inside_the_upgrade_leaves_the_database_as_it_was(older, tmp_path):
    path = _copy(older, tmp_path)
    before = path.read_bytes()
    with warnings.catch_warnings(), stop_after_leftover():
        warnings.simplefilter("ignore", mlflow_schema.StoreWarning)
        with pytest.raises((Stopped, StoreError)):
            mlflow_schema.ensure(path)
    assert path.read_bytes() == before  # the copy was stopped, not the database
    assert not path.with_name(".mlflow.db.upgrading").exists()
    with pytest.warns(mlflow_schema.StoreWarning):
        mlflow_schema.ensure(path)  # the rerun upgrades it
    assert mlflow_schema.read_schema(path).version == mlflow_schema.head_revision()
    assert runs_named(path, "kept") == 1


def test_a_half_done_in_place_upgrade_is_named_and_ablate_repair_mends_it(tmp_path, capsys):
    """MLflow's oldest migrations commit statement by statement: a database of MLflow 1.x
    upgraded in place and killed there is the half-upgraded one every run would stop on."""
    path = _database(tmp_path / "mlflow.db", None)
    killed = subprocess.run(  # SIGKILLed in place, inside `mlflow db upgrade`'s rebuild
        [sys.executable, "-c", KILLED_IN_PLACE, str(path)], capture_output=True, timeout=120
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    found = mlflow_schema.read_schema(path)
    assert found.leftovers and found.version is None
    wedged = path.read_bytes()
    with pytest.raises(StoreError) as raised:
        tracking.open_store(f"sqlite:///{path}").init()
    said = str(raised.value)
    assert said.startswith(f"{path} holds 1 run(s) but its MLflow schema is half-upgraded")
    assert said.endswith(f"ablate repair --tracking-uri sqlite:///{path}") and "\n" not in said
    assert path.read_bytes() == wedged  # named, never touched
    assert main(["repair", "--tracking-uri", f"sqlite:///{path}"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{path} repaired: ")
    assert f"upgraded to {mlflow_schema.head_revision()}" in out
    assert path.with_name("mlflow.db.bak").read_bytes() == wedged
    after = mlflow_schema.read_schema(path)
    assert after.leftovers == () and after.version == mlflow_schema.head_revision()
    assert runs_named(path, "kept") == 1
    tracking.open_store(f"sqlite:///{path}").init()  # opens again


def test_repair_refuses_what_it_cannot_mend(tmp_path, capsys):
    junk = tmp_path / "mlflow.db"
    with contextlib.closing(sqlite3.connect(junk)) as db:
        db.execute("CREATE TABLE other (x)")
    assert main(["repair", "--tracking-uri", f"sqlite:///{junk}"]) == 2
    assert "holds no MLflow runs table: restore it from a copy" in capsys.readouterr().err
    assert main(["repair", "--tracking-uri", f"jsonl://{tmp_path}/store"]) == 2
    assert "ablate repair has nothing to mend in it" in capsys.readouterr().err


def test_a_stop_inside_a_repair_leaves_the_database_as_it_was(tmp_path, monkeypatch, capsys):
    from ablate.tracking import mlflow_repair

    path = _database(tmp_path / "mlflow.db", None)
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_IN_PLACE, str(path)], capture_output=True, timeout=120
    )
    assert killed.returncode == -9
    wedged = path.read_bytes()

    class Killed(BaseException):
        pass

    def killed_before_the_swap(work, target):
        raise Killed

    monkeypatch.setattr(mlflow_repair, "swap_in", killed_before_the_swap)
    with pytest.raises(Killed):
        main(["repair", "--tracking-uri", f"sqlite:///{path}"])
    assert path.read_bytes() == wedged  # the repair worked on a copy
    monkeypatch.undo()
    assert main(["repair", "--tracking-uri", f"sqlite:///{path}"]) == 0  # the rerun mends it
    assert "repaired" in capsys.readouterr().out
    assert path.with_name("mlflow.db.bak.1").read_bytes() == wedged  # the first .bak is kept
    assert mlflow_schema.read_schema(path).version == mlflow_schema.head_revision()
    assert runs_named(path, "kept") == 1
