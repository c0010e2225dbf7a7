"""`ablate repair`: an MLflow sqlite database holding runs that an in-place migration (MLflow's
own, or an older ablate's) left half-done, mended on a copy swapped in whole.

SQLite commits most of a migration's DDL statement by statement, so a migration stopped halfway
leaves its first steps done (a column added, a `_alembic_tmp_<table>` created) with the schema
version still the old one: MLflow then stops on every open, and rerunning the migration stops on
its own first steps. `repair` keeps a copy (`mlflow.db.bak`), then on a working copy rolls the
schema back to the shape of the version it records (what that version does not have: the
leftover tables, added columns and indexes, which hold nothing the version kept), upgrades it to
this MLflow's head and renames it over the database. Its runs are kept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from ablate.base.errors import StoreError
from ablate.tracking.mlflow_schema import (
    LEFTOVER,
    copy_beside,
    engine_of,
    head_revision,
    migrate,
    read_schema,
    swap_in,
)


def _shape(path: Path) -> dict[str, tuple[set[str], set[str]]]:
    """table -> (its columns, its named indexes)."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        out = {}
        for t in tables:
            if t.startswith("sqlite_"):
                continue
            columns = {r[1] for r in db.execute(f'PRAGMA table_info("{t}")')}
            indexes = {r[1] for r in db.execute(f'PRAGMA index_list("{t}")') if r[3] == "c"}
            out[t] = (columns, indexes)
    return out


def _version_shape(version: str | None) -> dict[str, tuple[set[str], set[str]]]:
    """The shape an MLflow database has at schema `version` (None: MLflow's initial tables,
    before its first migration recorded a version), built in a temporary file."""
    from mlflow.store.tracking.dbmodels.initial_models import Base as InitialBase

    with tempfile.TemporaryDirectory() as tmp:
        reference = Path(tmp) / "reference.db"
        engine = engine_of(reference)
        try:
            InitialBase.metadata.create_all(engine)
        finally:
            engine.dispose()
        if version is not None:
            migrate(reference, version)
        return _shape(reference)


def _rollback_statements(work: Path, version: str | None) -> list[str]:
    """What undoes a half-done migration's committed steps on `work`: its leftover tables, and
    the tables, columns and indexes version `version` does not have."""
    want, have = _version_shape(version), _shape(work)
    out = []
    for table, (columns, indexes) in have.items():
        if table.startswith(LEFTOVER):
            original = table.removeprefix(LEFTOVER)
            if original not in have:  # the copy outlived its original: it is the table
                out.append(f'ALTER TABLE "{table}" RENAME TO "{original}"')
            else:
                out.append(f'DROP TABLE "{table}"')
            continue
        if table not in want:
            out.append(f'DROP TABLE "{table}"')
            continue
        out += [f'DROP INDEX "{i}"' for i in sorted(indexes - want[table][1])]
        out += [
            f'ALTER TABLE "{table}" DROP COLUMN "{c}"' for c in sorted(columns - want[table][0])
        ]
    return out


def repair(path: Path) -> str:
    """Mend the half-migrated database at `path` on a copy (see the module doc); what was done,
    in one line. A whole database is left alone."""
    found = read_schema(path)
    head = head_revision()
    if not found.exists:
        raise StoreError(f"no database {path} to repair")
    if not found.leftovers and found.version == head:
        return f"{path} is whole (schema {head}): nothing to repair"
    if "runs" not in found.tables:
        raise StoreError(f"{path} holds no MLflow runs table: restore it from a copy")
    work = copy_beside(path, "repairing")
    try:
        undo = _rollback_statements(work, found.version)
        with contextlib.closing(sqlite3.connect(work, isolation_level=None)) as db:
            for statement in undo:
                db.execute(statement)
        migrate(work)
        swap_in(work, path)
    except sqlite3.Error as exc:
        raise StoreError(f"{path} cannot be repaired ({exc}): restore it from a copy") from None
    finally:
        work.unlink(missing_ok=True)
    was = found.version or "initial"
    return f"{path} repaired: {len(undo)} half-done step(s) undone, schema {was} upgraded to {head}"


def keep_copy(path: Path) -> Path:
    """`path.bak` (a `.bak.N` when taken): the copy kept before a repair touches anything."""
    backup, n = path.with_name(path.name + ".bak"), 1
    while backup.exists():
        backup, n = path.with_name(f"{path.name}.bak.{n}"), n + 1
    partial = backup.with_name(f".{backup.name}.copying")  # a stop leaves no partial .bak
    shutil.copy2(path, partial)
    os.replace(partial, backup)
    return backup
