"""Where metrics go. The `Tracker` protocol with a no-op and an in-memory implementation; the
MLflow one lives here too (this is the only module that may import mlflow)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Tracker(Protocol):
    def log_params(self, params: Mapping[str, Any]) -> None: ...
    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None: ...
    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None: ...
    def set_tags(self, tags: Mapping[str, str]) -> None: ...


class NullTracker:
    """Discards everything."""

    def log_params(self, params: Mapping[str, Any]) -> None:
        pass

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        pass

    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None:
        pass

    def set_tags(self, tags: Mapping[str, str]) -> None:
        pass


class MemoryTracker:
    """Keeps everything in memory (tests, notebooks, the quick smoke path)."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}
        self.tags: dict[str, str] = {}
        self.metrics: list[tuple[int, dict[str, float]]] = []
        self.samples: list[tuple[str, int, list[dict[str, Any]]]] = []

    def log_params(self, params: Mapping[str, Any]) -> None:
        self.params.update(params)

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.metrics.append((step, dict(metrics)))

    def log_samples(self, name: str, records: Sequence[Mapping[str, Any]], step: int) -> None:
        self.samples.append((name, step, [dict(r) for r in records]))

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.tags.update(tags)

    def history(self, key: str) -> list[tuple[int, float]]:
        """[(step, value)] of one metric in logging order."""
        return [(s, m[key]) for s, m in self.metrics if key in m]

    def last(self, key: str) -> float:
        values = self.history(key)
        if not values:
            raise KeyError(f"metric {key!r} was never logged")
        return values[-1][1]
