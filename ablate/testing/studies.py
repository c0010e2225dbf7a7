"""Studies for report and fault tests: a `StudyData` built in memory, and a store's ledger of a
study (every trial's runs and every (metric, step) it holds) with the exactly-once check."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ablate import tracking


def study_data(
    runs: Sequence[tuple],
    *,
    algorithms: Mapping[str, Any],
    reference: str,
    passk: Any = None,
    replicates: Mapping[str, str] | None = None,
    effect_of_interest: float | None = None,
    group_size: int = 8,
    max_new_tokens: int = 80,
    samples: Mapping[tuple[str, int], Any] | None = None,
    **fields: Any,
):
    """A `report.load.StudyData` built in memory, for report tests without MLflow.

    `runs`: (arm, model, seed, {metric: [value at step 0, 1, ...] or {step: value}}[, outcome])
    with outcome "finished" (default), "diverged" (at its last step) or "failed"; the template is
    "plain". `algorithms`: arm -> Algorithm. `samples`: (arm, seed) -> a [J problems][K samples]
    array of 0/1 eval outcomes at the trial's last step (problem ids p0, p1, ...). `fields`:
    further `StudyData` fields (equivalence_margin, positive_control, primary, ...)."""

    import pandas as pd

    from ablate.report.data.load import StudyData

    keys = ["trial_id", "arm", "model", "template", "seed"]
    trials, history, sample_rows = [], [], []
    for i, (arm, model, seed, curves, *rest) in enumerate(runs):
        outcome = rest[0] if rest else "finished"
        steps = [
            step for c in curves.values() for step in (c if isinstance(c, dict) else range(len(c)))
        ]
        row = dict(trial_id=f"t{i}", arm=arm, model=model, template="plain", seed=seed)
        algo = {f"algo.{k}": v for k, v in dataclasses.asdict(algorithms[arm]).items()}
        trials.append({**row, **algo, **_trial_state(i, outcome, max(steps, default=0))})
        for metric, values in curves.items():
            items = values.items() if isinstance(values, dict) else enumerate(values)
            history += [{**row, "step": st, "metric": metric, "value": float(v)} for st, v in items]
        sample_rows += _sample_rows(row, max(steps, default=0), (samples or {}).get((arm, seed)))
    return StudyData(
        "synthetic",
        reference,
        pd.DataFrame(trials),
        pd.DataFrame(history, columns=[*keys, "step", "metric", "value"]),
        pd.DataFrame(sample_rows),
        passk if passk is not None else pd.DataFrame(),
        group_size,
        max_new_tokens,
        algorithms=dict(algorithms),
        replicates=dict(replicates or {}),
        effect_of_interest=effect_of_interest,
        **fields,
    )


def _trial_state(i: int, outcome: str, last: int) -> dict:
    reason = f"diverged at step {last}: loss is not finite"
    return {
        "status": "FINISHED" if outcome != "failed" else "FAILED",
        "outcome": outcome,
        "reason": {"finished": "", "diverged": reason}.get(outcome, "error"),
        "run_id": f"r{i}",
        "complete": outcome == "finished",
        "diverged_step": last if outcome == "diverged" else float("nan"),
    }


def _sample_rows(row: dict, step: int, outcomes: Any) -> list[dict]:
    """Eval sample records of one trial at `step` from its [J][K] 0/1 outcomes (None: none)."""
    return [
        {**row, "step": step, "problem_id": f"p{j}", "sample": k}
        | {"correct": bool(c), "length": 10, "truncated": False}
        for j, per_problem in enumerate([] if outcomes is None else outcomes)
        for k, c in enumerate(per_problem)
    ]


def study_ledger(uri: str, study_name: str) -> dict[str, Any]:
    """What a study left in its results store (any, by URI), for exactly-once checks: `runs`
    (trial id -> list of (run id, status), so a trial run twice shows two entries) and `rows`
    (trial id -> metric -> step -> how many rows the store holds)."""

    store = tracking.open_store(uri)
    table = store.runs(study_name)
    runs: dict[str, list[tuple[str, str]]] = {}
    rows: dict[str, dict[str, dict[int, int]]] = {}
    for _, run in table.runs.iterrows():
        runs.setdefault(run["trial_id"], []).append((run["run_id"], run["status"]))
        per_key = rows.setdefault(run["trial_id"], {})
        for key in table.metrics_of(run["run_id"]):
            counts = store.metric_rows_per_step(run["run_id"], key)
            if counts:
                per_key[key] = counts
    return {"runs": runs, "rows": rows}


def exactly_once_problems(
    ledger: dict[str, Any], trial_ids: Sequence[str], steps: Sequence[int], key: str
) -> list[str]:
    """Every way `ledger` breaks "each trial FINISHED exactly once, each (metric, step) exactly
    once, and `key` logged at every step of `steps`"; [] when it holds."""
    problems = []
    for trial_id in trial_ids:
        runs = ledger["runs"].get(trial_id, [])
        if [status for _, status in runs] != ["FINISHED"]:
            problems.append(f"{trial_id}: runs {runs}, expected one FINISHED")
        for metric, counts in ledger["rows"].get(trial_id, {}).items():
            twice = sorted(step for step, n in counts.items() if n > 1)
            if twice:
                problems.append(f"{trial_id}: {metric} logged more than once at steps {twice}")
        logged = ledger["rows"].get(trial_id, {}).get(key, {})
        missing = sorted(set(steps) - set(logged))
        if missing:
            problems.append(f"{trial_id}: {key} missing at steps {missing}")
    return problems
