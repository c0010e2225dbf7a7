"""Where studies' runs are kept: results stores behind one port, chosen by the URI's scheme.

- `ablate.base.store.port`: the port (`Tracker`, `StudyStore`, `StudyRun`; `StoreFailures`),
  `ablate.base.store.leases` the lease port, `ablate.base.store.ui` the optional UI,
  `ablate.base.store.table` the store-neutral `RunTable`, `ablate.base.store.tags` the tags;
- `ablate.tracking.registry`: the stores by URL scheme (`STORES`);
- `ablate.tracking.mlflow*`: the MLflow adapter (any MLflow tracking URI: sqlite, PostgreSQL,
  a tracking server), the default, and the only code that imports mlflow;
- `ablate.tracking.files*`: the file store (`jsonl:///abs/folder`): JSON files in a folder;
- `ablate.tracking.sql_leases`: trial leases in a SQL database, wherever a store keeps them.

Everything outside this package opens a store with `open_store(uri)` and sees it through the
ports only: `leases_of`, `is_failure` and `ui_of` ask a store for what it may add to the core
port. A new store is one module and one `register_store` line. Adapters are registered by name
and imported when a store of theirs is opened: `import ablate.tracking` stays cheap.
"""

from __future__ import annotations

from pathlib import Path

from ablate.base.errors import ConfigError
from ablate.base.store.common import algorithm_diff_tags, disk_failure, environment_tags
from ablate.base.store.leases import LeasePort, LeaseTable
from ablate.base.store.port import (
    MemoryTracker,
    NullTracker,
    StoreFailures,
    StudyRun,
    StudyStore,
    Tracker,
)
from ablate.base.store.table import RunRecord, RunTable
from ablate.base.store.ui import HasUI, StoreUI, StudyPage
from ablate.tracking.registry import Opener, StoreRegistry

__all__ = [
    "STORES",
    "LeaseTable",
    "MemoryTracker",
    "NullTracker",
    "RunRecord",
    "RunTable",
    "StoreUI",
    "StudyPage",
    "StudyRun",
    "StudyStore",
    "Tracker",
    "algorithm_diff_tags",
    "default_uri",
    "environment_tags",
    "is_failure",
    "leases_of",
    "open_store",
    "read_problem",
    "register_store",
    "repair",
    "ui_of",
]

#: The results stores by URL scheme.
STORES = StoreRegistry()


def register_store(schemes: str | tuple[str, ...], opener: Opener) -> None:
    """Serve the URIs of `schemes` with the store `opener(uri)` builds (a "module:attribute"
    name is imported when a store of these schemes is first opened)."""
    STORES.register(schemes, opener)


register_store("jsonl", "ablate.tracking.files:FileStore")
# MLflow: a database `ablate ui` can serve, or a tracking server (it serves its own UI)
register_store(
    ("sqlite", "postgresql", "postgres", "mysql", "mssql", "file"),
    "ablate.tracking.mlflow:MLflowDatabaseStore",
)
register_store(("http", "https", "databricks"), "ablate.tracking.mlflow:MLflowStore")


def default_uri(results_dir: str | Path) -> str:
    """The default store of a results folder: MLflow on `sqlite:////abs/<results_dir>/mlflow.db`
    (nothing is created until the store's `init`)."""
    return f"sqlite:///{Path(results_dir).expanduser().resolve() / 'mlflow.db'}"


def open_store(uri: str) -> StudyStore:
    """The store at `uri`, by its scheme (`STORES`); ConfigError for a scheme no store serves.
    Opening touches nothing."""
    return STORES.open(uri)


def leases_of(store: StudyStore, results_root: str | Path) -> LeaseTable:
    """The lease table of `store`'s studies: where the store keeps its leases (`LeasePort`),
    else `leases.db` in the results folder `results_root`. Touches nothing."""
    if isinstance(store, LeasePort):
        return store.leases(Path(results_root))
    from ablate.tracking.sql_leases import LeaseStore  # the adapters' modules load on first use

    return LeaseStore.in_folder(results_root)


def is_failure(store: StudyStore, exc: BaseException) -> bool:
    """Whether `exc` is a failure of `store` (as it classifies its own, `StoreFailures`) or of the
    disk, not of a trial: the study stops with one line, and a rerun once it is fixed resumes."""
    return disk_failure(exc) or (isinstance(store, StoreFailures) and store.is_failure(exc))


def repair(store: StudyStore) -> str:
    """Mend what a stop left half-made in `store` (a store's optional `repair()`: the MLflow
    sqlite database's half-done upgrade), keeping its runs; what was done, in one line."""
    mend = getattr(store, "repair", None)
    if mend is None:
        raise ConfigError(f"{store.kind} {store.uri}: ablate repair has nothing to mend in it")
    return mend()


def read_problem(store: StudyStore) -> str | None:
    """What a command that only reads should say before it reads `store`, in one line (a
    store's optional `read_problem()`: a half-upgraded MLflow database, with its repair)."""
    look = getattr(store, "read_problem", None)
    return None if look is None else look()


def ui_of(store: StudyStore) -> StoreUI | None:
    """The store's browser UI (`HasUI`), or None when it has none."""
    return store.ui() if isinstance(store, HasUI) else None
