"""A study's trial runs as a store-neutral table (`RunTable`): typed columns read from the tag
vocabulary here, once, so no consumer parses a store's own schema (MLflow's `tags.*` columns).
pandas is imported inside functions: importing the port stays cheap."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ablate.base.store import tags as tag

if TYPE_CHECKING:
    import pandas as pd

#: The typed columns of `RunTable.runs`, in order. `seed` and `resumes` are nullable integers,
#: `start_time` / `end_time` milliseconds since the epoch (`end_time` missing while RUNNING).
COLUMNS = (
    "run_id",
    "trial_id",
    "status",
    "outcome",
    "outcome_message",
    "arm",
    "model",
    "template",
    "seed",
    "task",
    "model_weights",
    "run_name",
    "resumes",
    "start_time",
    "end_time",
)
_FROM_TAG = {
    "trial_id": tag.TRIAL_ID,
    "outcome": tag.OUTCOME,
    "outcome_message": tag.OUTCOME_MESSAGE,
    "arm": tag.ARM,
    "model": tag.MODEL,
    "template": tag.TEMPLATE,
    "task": tag.TASK,
    "model_weights": tag.MODEL_WEIGHTS,
}
_INTEGER = ("seed", "resumes", "start_time", "end_time")


@dataclass(frozen=True)
class RunRecord:
    """One trial run as an adapter reads it back: what `RunTable.from_records` takes."""

    run_id: str
    status: str
    run_name: str = ""
    start_time: int | None = None
    end_time: int | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)  # each metric's last value


def _integer(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _row(record: RunRecord) -> dict[str, object]:
    row: dict[str, object] = {c: record.tags.get(t) for c, t in _FROM_TAG.items()}
    row.update(run_id=record.run_id, status=record.status, run_name=record.run_name)
    row.update(start_time=record.start_time, end_time=record.end_time)
    row.update(seed=_integer(record.tags.get(tag.SEED)))
    row.update(resumes=_integer(record.tags.get(tag.RESUMES)) or 0)
    return row


class RunTable:
    """A study's trial runs, one row each, oldest first.

    - `runs`: the typed `COLUMNS` (a tag a run lacks is missing, never a KeyError);
    - `metrics`: one column per metric name, each run's last value (NaN where never logged);
    - `params`: one column per param name, as logged (text).
    The three frames share one index, so a mask or a row position selects the same runs."""

    def __init__(self, runs: pd.DataFrame, metrics: pd.DataFrame, params: pd.DataFrame) -> None:
        self.runs, self.metrics, self.params = runs, metrics, params

    @classmethod
    def from_records(cls, records: Iterable[RunRecord]) -> RunTable:
        """The table of `records` in their order; runs of trials the study's current plan
        dropped (`CURRENT` "false") are left out: the summary, the pilot and the report count
        the current plan only."""
        import pandas as pd

        kept = [r for r in records if r.tags.get(tag.CURRENT) != "false"]
        runs = pd.DataFrame([_row(r) for r in kept], columns=list(COLUMNS))
        for column in _INTEGER:
            runs[column] = runs[column].astype("Int64")
        metrics = pd.DataFrame([dict(r.metrics) for r in kept], index=runs.index, dtype=float)
        params = pd.DataFrame([dict(r.params) for r in kept], index=runs.index, dtype=object)
        return cls(runs, metrics, params)

    def __len__(self) -> int:
        return len(self.runs)

    @property
    def empty(self) -> bool:
        return self.runs.empty

    def metric(self, name: str) -> pd.Series:
        """Each run's last value of metric `name` (NaN where the run never logged it)."""
        import pandas as pd

        if name in self.metrics:
            return self.metrics[name].astype(float)
        return pd.Series(float("nan"), index=self.runs.index, dtype=float)

    def metrics_of(self, run_id: str) -> dict[str, float]:
        """{metric: last value} of the metrics run `run_id` logged."""
        rows = self.metrics[(self.runs["run_id"] == run_id).to_numpy()]
        if rows.empty:
            return {}
        return {k: float(v) for k, v in rows.iloc[0].items() if v == v}  # v == v: not NaN

    def take(self, positions: Sequence[int]) -> RunTable:
        """The runs at row `positions` (in that order)."""
        return RunTable(
            self.runs.iloc[list(positions)],
            self.metrics.iloc[list(positions)],
            self.params.iloc[list(positions)],
        )

    def where(self, mask: Sequence[bool] | pd.Series) -> RunTable:
        """The runs where `mask` (aligned with `runs`) is true."""
        import numpy as np

        return self.take(np.flatnonzero(np.asarray(mask, dtype=bool)).tolist())

    def one_per_trial(self) -> RunTable:
        """A trial restarted into a new run keeps one: its FINISHED run, else its latest."""
        if self.empty:
            return self
        order = self.runs.assign(_done=self.runs["status"] == "FINISHED", _pos=range(len(self)))
        order = order.sort_values(["_done", "start_time"], kind="stable")
        # in that order, FINISHED runs last: a lookup by cell that meets two runs takes the later
        return self.take(order.drop_duplicates("trial_id", keep="last")["_pos"].tolist())
