"""How cost grows (ablate only): RL step time against group size G and completion length T, and
a whole study's wall time against its number of trials and `--workers`.

Cases of one sweep are interleaved round by round (A B C A B C ...), so "× base" ratios compare
runs that saw the same machine load.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from devtools.bench.harness import Row, interleave, ratio_summary, rows_for, summarize
from devtools.bench.step import AblateStepper, StepCase, StepRecord

SECTION_STEPS = "scaling"
SECTION_STUDY = "study"


def sweep_cases(
    size: str, groups: Sequence[int], lengths: Sequence[int], prompts: int = 8
) -> tuple[list[StepCase], StepCase]:
    """(cases, base): the G sweep at T = lengths[0], then the T sweep at G = 8 (or groups[0]),
    without duplicates; the base case (G = 8, T = lengths[0]) is where the two sweeps meet."""
    base_g = 8 if 8 in groups else groups[0]
    cases = [StepCase(size, prompts, g, lengths[0]) for g in groups]
    cases += [StepCase(size, prompts, base_g, t) for t in lengths]
    return list(dict.fromkeys(cases)), StepCase(size, prompts, base_g, lengths[0])


def step_rows(
    cases: Sequence[StepCase],
    base: StepCase,
    folder: Path,
    tracker_for: Callable[[str], Any],
    repeats: int,
    warmup: int,
) -> list[Row]:
    """Step / gen / train seconds per case, and each case's step time relative to `base`'s."""
    steppers = {c.label: AblateStepper(c, folder, tracker_for(c.label)) for c in cases}
    runs = interleave({k: s.step for k, s in steppers.items()}, repeats, warmup)
    base_walls = [r.wall for r in runs.results[base.label]]  # type: ignore[union-attr]
    ratio_name = f"step ÷ base (G={base.group}, T={base.new_tokens})"
    rows: list[Row] = []
    for case in cases:
        records: list[StepRecord] = runs.results[case.label]  # type: ignore[assignment]
        walls = [r.wall for r in records]
        series = {
            "step": walls,
            "gen": [r.gen for r in records],
            "train": [r.train for r in records],
        }
        rows += rows_for(SECTION_STEPS, case.label, "s", series)
        ratio = ratio_summary(walls, base_walls)
        rows.append(Row(SECTION_STEPS, case.label, ratio_name, "ratio", ratio))
    return rows


# -- study wall time -----------------------------------------------------------------------------


def tiny_study(name: str, trials: int, steps: int = 3, new_tokens: int = 16):
    """A study of `trials` trials (one grpo arm, one seed each) on the rl_ready model: a few
    RL steps each, a tiny final eval, no start eval and no Pass@G phase."""
    from ablate.study.study import Budget, EvalSpec, Study, arm

    return Study(
        name=name,
        base_models=("rl_ready",),
        arms=[arm("grpo", "grpo")],
        seeds=tuple(range(trials)),
        budget=Budget(max_steps=steps, prompts_per_step=8, group_size=8, max_new_tokens=new_tokens),
        eval=EvalSpec(at_start=False, n_samples=2, ks=(1,), max_problems=4),
        passk=None,
        checkpoint_every=0,
    )


def time_study(study, results_dir: Path, uri: str, workers: int) -> float:
    """Wall seconds of `run_study` (the real runner); RuntimeError unless every trial finished."""
    from ablate.study.runner import run_study

    start = time.perf_counter()
    outcomes = run_study(study, results_dir=results_dir, workers=workers, tracking_uri=uri)
    seconds = time.perf_counter() - start
    bad = [o for o in outcomes if o.outcome != "finished"]
    if len(outcomes) != len(study.trials()) or bad:
        detail = "; ".join(f"{o.trial_id}: {o.outcome} {o.message}" for o in bad)
        raise RuntimeError(f"benchmark study {study.name} did not finish: {detail}")
    return seconds


def study_rows(
    trial_counts: Sequence[int],
    worker_counts: Sequence[int],
    results_dir: Path,
    repeats: int,
    steps: int = 3,
    progress: Callable[[str], None] | None = None,
) -> list[Row]:
    """Study wall time per (trials, workers), interleaved; a fresh study name per run in one
    store created up front (its one-off schema migration is not a study's cost)."""
    from ablate.tracking import default_uri, open_store

    uri = default_uri(results_dir)
    open_store(uri).init()
    configs = [(n, w) for n in trial_counts for w in worker_counts]
    counter = iter(range(10**9))

    def runner(n: int, w: int) -> Callable[[], float]:
        def run() -> float:
            if progress is not None:
                progress(f"study of {n} trial(s), {w} worker(s)")
            study = tiny_study(f"bench-t{n}-w{w}-{next(counter)}", n, steps)
            return time_study(study, results_dir, uri, w)

        return run

    runner(1, worker_counts[0])()  # warm-up: lazy imports and the first model load
    runs = interleave({f"{n}|{w}": runner(n, w) for n, w in configs}, repeats, warmup=0)
    rows: list[Row] = []
    for n, w in configs:
        walls = runs.seconds[f"{n}|{w}"]
        case = f"{n} trial(s), {w} worker(s)"
        note = f"{steps} RL steps per trial"
        rows.append(Row(SECTION_STUDY, case, "study wall", "s", summarize(walls), note=note))
        rows += rows_for(SECTION_STUDY, case, "s", {"per trial": [s / n for s in walls]})
    for n in trial_counts:
        for w in worker_counts[1:]:
            one, many = runs.seconds[f"{n}|{worker_counts[0]}"], runs.seconds[f"{n}|{w}"]
            metric = f"speed-up: {worker_counts[0]}-worker wall ÷ {w}-worker wall"
            rows.append(Row(SECTION_STUDY, f"{n} trial(s)", metric, "×", ratio_summary(one, many)))
    return rows
