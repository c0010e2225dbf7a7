"""A store's browser UI (`ablate ui`): an optional capability. A store that has one implements
`HasUI`; `ablate.tracking.ui_of(store)` is None for every other store (the file store, an MLflow
tracking server, which serves its own)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class StudyPage:
    """A study's page in a store's UI, and its report there when one is attached."""

    study: str
    url: str
    report_url: str | None = None


class StoreUI(Protocol):
    """A store's browser UI (`ablate ui`)."""

    name: str  # e.g. "MLflow UI"
    # Optional `health_path` (default "/"): the path `ablate ui` polls before printing links.

    def command(self, host: str, port: int) -> list[str]:
        """The server to start (argv), serving this store on `host:port`."""
        ...

    def publish(self, base_url: str) -> list[StudyPage]:
        """Write each study's view now; its pages under the UI at `base_url`."""
        ...


@runtime_checkable
class HasUI(Protocol):
    """A store `ablate ui` can serve."""

    def ui(self) -> StoreUI:
        """The store's browser UI (built on demand: it may import what browsing needs)."""
        ...
