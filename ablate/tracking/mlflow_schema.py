"""A sqlite MLflow database is made, and upgraded, whole or not at all.

MLflow builds a fresh database's schema in place, through ~1,700 DDL statements that SQLite
commits one by one: a kill halfway leaves a file every later run stops on (`table
_alembic_tmp_metrics already exists`). Here a fresh database is built under a temporary name
beside it (`.mlflow.db.creating`) and renamed into place once its schema is at MLflow's head
revision, so `mlflow.db` is either absent or whole; one that holds runs at an older revision (a
newer MLflow installed) is migrated on a copy (`.mlflow.db.upgrading`) renamed over it when
whole. A database a kill (or an older ablate) left half-made is detected: holding nothing, it is
built again; holding runs, it is never touched but named in a `StoreError` with the command
that repairs it (`ablate repair`, `ablate.tracking.mlflow_repair`).

`ensure` runs in `MLflowStore.init` under a lock beside the database (the runner's setup).
The fault point `store_schema@<n>` kills the process at the n-th statement of a build.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sqlite3
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ablate.base import durable, faults
from ablate.base.errors import AblateWarning, StoreError
from ablate.base.locks import file_lock
from ablate.base.waits import waiting


class StoreWarning(AblateWarning):
    """Something the results store does that takes a while (an upgrade of its schema)."""


#: The fault point of a schema build, at each statement's number.
POINT = "store_schema"
#: Tables whose rows are MLflow's own bookkeeping of an empty database, not a user's data.
_BOOKKEEPING = ("alembic_version", "workspaces", "experiments")
LEFTOVER = "_alembic_tmp_"


@dataclass(frozen=True)
class Schema:
    """What a database file holds, read with sqlite3 alone."""

    exists: bool
    version: str | None = None
    leftovers: tuple[str, ...] = ()
    """Tables a migration killed halfway left (`_alembic_tmp_<table>`)."""
    tables: frozenset[str] = field(default_factory=frozenset)


def read_schema(path: Path) -> Schema:
    """The schema state of the sqlite file at `path` (a missing or empty file: not there)."""
    if not path.is_file() or path.stat().st_size == 0:
        return Schema(exists=False)
    # read-write: a journal a kill left behind is rolled back first, as any open would
    with _open(path) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        tables = frozenset(names)
        version = None
        if "alembic_version" in tables:
            row = db.execute("SELECT version_num FROM alembic_version").fetchone()
            version = row[0] if row else None
    leftovers = tuple(sorted(t for t in tables if t.startswith(LEFTOVER)))
    return Schema(True, version, leftovers, tables)


def held(path: Path, schema: Schema) -> tuple[int, bool]:
    """(runs, whether it holds anything besides an empty database's bookkeeping): asked only
    of a database that is not whole (a whole one's tables can be large)."""
    tables = schema.tables
    with _open(path) as db:
        runs = sum(_count(db, t) for t in ("runs", f"{LEFTOVER}runs") if t in tables)
        data = runs > 0 or any(_any(db, t) for t in tables if _user_table(t))
        if not data and "experiments" in tables:
            data = _any(db, "experiments", "name != 'Default'")
    return runs, data


@contextlib.contextmanager
def _open(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the database at `path`, its waits on another process's lock said."""
    what = f"the database {path}, which another process may hold locked"
    with waiting(what), contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        yield db


def _count(db: sqlite3.Connection, table: str) -> int:
    return db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]


def _any(db: sqlite3.Connection, table: str, where: str = "1") -> bool:
    return db.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}" WHERE {where})').fetchone()[0]


def _user_table(name: str) -> bool:
    base = name.removeprefix(LEFTOVER)
    return base not in _BOOKKEEPING and not name.startswith("sqlite_")


def head_revision() -> str:
    """The schema revision this MLflow builds and expects."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return _get_latest_schema_revision()


def ensure(path: Path) -> None:
    """The database at `path` whole at this MLflow's head revision: built when absent (or
    half-made and empty), migrated on a copy when whole at an older revision and holding runs,
    left alone when whole; a half-made one holding runs is a StoreError naming it and its
    repair. Under a lock beside it: one builder per machine."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with building(path):
        found = read_schema(path)
        head = head_revision()
        whole = found.exists and not found.leftovers and found.version is not None
        if whole and (found.version == head or not _known(found.version)):
            return  # whole, or a newer MLflow's: MLflow says what it makes of that
        runs, data = held(path, found) if found.exists else (0, False)
        if not data:
            build(path)
        elif not whole:
            raise StoreError(half_made(path, found, runs, head))
        else:
            try:
                upgrade(path)
            except StoreError:
                raise
            except Exception as exc:  # a migration that stops on an earlier one's half
                raise StoreError(half_made(path, found, runs, head, exc)) from exc


def building(path: Path) -> contextlib.AbstractContextManager[None]:
    """The lock beside the database that its builds, upgrades and repairs hold."""
    lock = path.with_name(f".{path.name}.lock")
    return file_lock(lock, f"the lock on building {path} (another process builds it)")


def _known(version: str) -> bool:
    """Whether `version` is a revision of this MLflow's history (a newer MLflow's is not)."""
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    script = ScriptDirectory.from_config(_get_alembic_config("sqlite://"))
    try:
        return script.get_revision(version) is not None
    except Exception:  # alembic's "no such revision"
        return False


def build(path: Path) -> None:
    """A fresh schema in `.<name>.creating` beside `path`, renamed over `path` when whole (a
    half-made file there, and its journal, are replaced: they hold nothing)."""
    import sqlalchemy as sa
    from mlflow.store.db.utils import _initialize_tables

    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("mlflow.store.db.utils").setLevel(logging.CRITICAL)
    tmp = path.with_name(f".{path.name}.creating")
    for stale in _with_journals(tmp):
        stale.unlink(missing_ok=True)
    engine = engine_of(tmp)
    statements = itertools.count(1)
    sa.event.listen(
        engine, "before_cursor_execute", lambda *_: faults.point(POINT, next(statements))
    )
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()
    for stale in _with_journals(path)[1:]:  # a killed build's journal must not meet the new file
        stale.unlink(missing_ok=True)
    swap_in(tmp, path)


def _with_journals(path: Path) -> list[Path]:
    return [path, *(path.with_name(path.name + s) for s in ("-journal", "-wal", "-shm"))]


def engine_of(path: Path):
    import sqlalchemy as sa

    return sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)


def migrate(path: Path, revision: str = "heads") -> None:
    """Alembic's upgrade of the sqlite file at `path` to `revision` (MLflow's migrations)."""
    from alembic import command
    from mlflow.store.db.utils import _get_alembic_config

    engine = engine_of(path)
    try:
        config = _get_alembic_config(str(engine.url))
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def copy_beside(path: Path, suffix: str) -> Path:
    """A consistent copy of the database beside it (SQLite's backup: a journal is honoured)."""
    work = path.with_name(f".{path.name}.{suffix}")
    work.unlink(missing_ok=True)
    with (
        contextlib.closing(sqlite3.connect(path)) as src,
        contextlib.closing(sqlite3.connect(work)) as dst,
    ):
        src.backup(dst)
    return work


def swap_in(work: Path, path: Path) -> None:
    """Rename `work`, once its schema is whole at the head revision, over `path`."""
    made = read_schema(work)
    if made.leftovers or made.version != head_revision():
        raise StoreError(f"{work} was left incomplete by MLflow ({made.version}): {path} is kept")
    durable.fsync_path(work)
    os.replace(work, path)
    durable.fsync_path(path.parent)


def upgrade(path: Path) -> None:
    """The whole database at `path`, at an older schema version, migrated to this MLflow's head
    on a copy renamed over it when whole: a stop leaves it as it was."""
    warnings.warn(
        f"upgrading {path} to this MLflow's schema {head_revision()}, on a copy renamed over it "
        "when whole",
        StoreWarning,
        stacklevel=2,
    )
    work = copy_beside(path, "upgrading")
    try:
        migrate(work)
        swap_in(work, path)
    finally:
        work.unlink(missing_ok=True)


def half_made(
    path: Path, found: Schema, runs: int, head: str = "", why: BaseException | None = None
) -> str:
    """One line: the database, what is wrong, and the command that repairs it."""
    left = f", leftover table(s) {', '.join(found.leftovers)}" if found.leftovers else ""
    of = f" of {head}" if head else ""
    stopped = f"; its upgrade stops: {str(why).splitlines()[0][:120]}" if why else ""
    return (
        f"{path} holds {runs} run(s) but its MLflow schema is half-upgraded (version "
        f"{found.version}{of}{left}{stopped}): a stop during an in-place upgrade left it so. "
        f"Repair it, keeping its runs (a copy is kept first as {path.name}.bak): ablate repair "
        f"--tracking-uri sqlite:///{path}"
    )


def leftover_problem(path: Path) -> str | None:
    """A cheap look before anything starts (sqlite3 alone, no MLflow): a database holding data
    with a migration's leftover tables, as `half_made` says it; None otherwise."""
    try:
        found = read_schema(path)
        if not found.leftovers:
            return None
        runs, data = held(path, found)
    except sqlite3.Error:
        return None  # a damaged file: its own check names it
    return half_made(path, found, runs) if data else None
