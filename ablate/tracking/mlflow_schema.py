"""A sqlite MLflow database is made whole or not at all.

MLflow builds a fresh database's schema in place, through ~1,700 DDL statements that SQLite
commits one by one: a kill halfway leaves a file every later run stops on (`table
_alembic_tmp_metrics already exists`). Here a fresh database is built under a temporary name
beside it (`.mlflow.db.creating`) and renamed into place once its schema is at MLflow's head
revision, so `mlflow.db` is either absent or whole; a database a kill (or an older ablate) left
half-made is detected and, since it holds nothing, built again. One that holds runs is never
touched: it is a `StoreError` naming the file and the commands that repair it.

`ensure` runs in `MLflowStore.init` under a lock beside the database (the runner's setup).
The fault point `store_schema@<n>` kills the process at the n-th statement of a build.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ablate.base import durable, faults
from ablate.base.errors import StoreError
from ablate.base.locks import file_lock

#: The fault point of a schema build, at each statement's number.
POINT = "store_schema"
#: Tables whose rows are MLflow's own bookkeeping of an empty database, not a user's data.
_BOOKKEEPING = ("alembic_version", "workspaces", "experiments")
_LEFTOVER = "_alembic_tmp_"


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
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        tables = frozenset(names)
        version = None
        if "alembic_version" in tables:
            row = db.execute("SELECT version_num FROM alembic_version").fetchone()
            version = row[0] if row else None
    leftovers = tuple(sorted(t for t in tables if t.startswith(_LEFTOVER)))
    return Schema(True, version, leftovers, tables)


def held(path: Path, schema: Schema) -> tuple[int, bool]:
    """(runs, whether it holds anything besides an empty database's bookkeeping): asked only
    of a database that is not whole (a whole one's tables can be large)."""
    tables = schema.tables
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        runs = sum(_count(db, t) for t in ("runs", f"{_LEFTOVER}runs") if t in tables)
        data = runs > 0 or any(_any(db, t) for t in tables if _user_table(t))
        if not data and "experiments" in tables:
            data = _any(db, "experiments", "name != 'Default'")
    return runs, data


def _count(db: sqlite3.Connection, table: str) -> int:
    return db.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]


def _any(db: sqlite3.Connection, table: str, where: str = "1") -> bool:
    return db.execute(f'SELECT EXISTS (SELECT 1 FROM "{table}" WHERE {where})').fetchone()[0]


def _user_table(name: str) -> bool:
    base = name.removeprefix(_LEFTOVER)
    return base not in _BOOKKEEPING and not name.startswith("sqlite_")


def head_revision() -> str:
    """The schema revision this MLflow builds and expects."""
    from mlflow.store.db.utils import _get_latest_schema_revision

    return _get_latest_schema_revision()


def ensure(path: Path) -> None:
    """The database at `path` whole at this MLflow's head revision: built when absent or
    half-made and empty, left alone when whole; a half-made one holding data is a StoreError
    naming it and its repair. Under a lock beside it: one builder per machine."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    with file_lock(lock, f"the lock on building {path} (another runner is building it)"):
        found = read_schema(path)
        head = head_revision()
        whole = found.exists and not found.leftovers and found.version is not None
        if whole and (found.version == head or not _known(found.version)):
            return  # whole, or a newer MLflow's: MLflow says what it makes of that
        if found.exists:
            runs, data = held(path, found)
            if data:
                raise StoreError(half_made(path, found, runs, head))
        build(path)


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
    engine = sa.create_engine(f"sqlite:///{tmp}", poolclass=sa.pool.NullPool)
    statements = itertools.count(1)
    sa.event.listen(
        engine, "before_cursor_execute", lambda *_: faults.point(POINT, next(statements))
    )
    try:
        _initialize_tables(engine)
    finally:
        engine.dispose()
    made = read_schema(tmp)
    if made.leftovers or made.version != head_revision():
        raise StoreError(f"MLflow left the new database {tmp} incomplete: remove it and rerun")
    durable.fsync_path(tmp)
    for stale in _with_journals(path)[1:]:  # a killed build's journal must not meet the new file
        stale.unlink(missing_ok=True)
    os.replace(tmp, path)
    durable.fsync_path(path.parent)


def _with_journals(path: Path) -> list[Path]:
    return [path, *(path.with_name(path.name + s) for s in ("-journal", "-wal", "-shm"))]


def half_made(path: Path, found: Schema, runs: int, head: str = "") -> str:
    """One line: the database, what is wrong, and the commands that repair it."""
    fixes = []
    for left in found.leftovers:
        table = left.removeprefix(_LEFTOVER)
        if table in found.tables:  # the original is whole: the copy was cut short
            fixes.append(f"DROP TABLE {left};")
        else:  # the original was dropped after the copy was made: the copy is the table
            fixes.append(f"ALTER TABLE {left} RENAME TO {table};")
    sql = f"sqlite3 {path} '{' '.join(fixes)}' && " if fixes else ""
    left = f", leftover table(s) {', '.join(found.leftovers)}" if found.leftovers else ""
    of = f" of {head}" if head else ""
    return (
        f"{path} holds {runs} run(s) but its MLflow schema is incomplete (version "
        f"{found.version}{of}{left}: a stop during an upgrade, or an older MLflow): keep a "
        f"copy (cp {path} {path}.bak), then repair it: {sql}mlflow db upgrade sqlite:///{path}"
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
