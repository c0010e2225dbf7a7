"""Where studies' runs are kept: results stores behind one port, chosen by URI.

- `ablate.base.store.port`: the port (`Tracker`, `StudyStore`, `StudyRun`, `StoreUI`),
  `ablate.base.store.table` the store-neutral `RunTable`, `ablate.base.store.tags` the tag
  vocabulary;
- `ablate.tracking.mlflow*`: the MLflow adapter (any MLflow tracking URI: sqlite, PostgreSQL,
  a tracking server), the default, and the only code that imports mlflow;
- `ablate.tracking.files*`: the file store (`jsonl:///abs/folder`): JSON files in a folder.

Everything outside this package opens a store with `open_store(uri)` and sees runs through the
port only. Adapters are imported when a store is opened: `import ablate.tracking` stays cheap.
"""

from __future__ import annotations

from pathlib import Path

from ablate.base.store.common import algorithm_diff_tags, environment_tags
from ablate.base.store.port import (
    MemoryTracker,
    NullTracker,
    StoreUI,
    StudyPage,
    StudyRun,
    StudyStore,
    Tracker,
)
from ablate.base.store.table import RunRecord, RunTable

__all__ = [
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
    "open_store",
]


def default_uri(results_dir: str | Path) -> str:
    """The default store of a results folder: MLflow on `sqlite:////abs/<results_dir>/mlflow.db`
    (nothing is created until the store's `init`)."""
    return f"sqlite:///{Path(results_dir).expanduser().resolve() / 'mlflow.db'}"


def open_store(uri: str) -> StudyStore:
    """The store at `uri`: the file store for `jsonl:///abs/folder`, else MLflow (sqlite,
    postgresql, http(s), whatever MLflow accepts). Opening touches nothing."""
    from ablate.tracking import files

    if uri.startswith(files.SCHEME):
        return files.FileStore(uri)
    from ablate.tracking.mlflow import MLflowStore

    return MLflowStore(uri)
