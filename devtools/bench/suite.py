"""The benchmark suite behind `python -m devtools bench`: ten sections, each a list of `Row`s.

trl       RL step time, ablate vs TRL GRPOTrainer on identical work (interleaved in-process)
natural   the same and rollouts vs `model.generate`, with completions ending at EOS (natural.py)
profile   where the natural-length step's time goes, phase by phase (profile.py)
rollout   rollout tokens/s with log-probs, our sampler vs `model.generate`
flops     train-step FLOP utilisation against a matmul peak measured in the same run
overhead  share of a step spent in diagnostics and MLflow tracking
scaling   ablate step time vs group size G and completion length T
study     study wall time vs number of trials and `--workers` (the real runner)
batching  trials per hour of the quickstart's arms, and the most seed-batching could add
vllm_cpu  rollout tokens/s, vLLM's CPU build vs HFEngine (run in .venv-vllm; vllm_cpu.py)

Every figure is a median over repeats with its min and max; every comparison is a ratio of two
series measured interleaved in this process.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devtools.bench.harness import Row, Target, interleave, ratio_summary, rows_for, summarize
from devtools.bench.options import SECTIONS, SuiteOptions
from devtools.bench.step import AblateStepper, StepCase, StepRecord

TRL_TARGETS = {"0.53M": Target("<=", 0.5), "4.2M": Target("<=", 0.8)}
ROLLOUT_TARGETS = {"0.53M": Target(">=", 1.3), "4.2M": Target(">=", 1.0)}
FLOPS_TARGETS = {"4.2M": Target(">=", 70.0)}
OVERHEAD_TARGET = Target("<=", 5.0)
SCALING_SIZE = "0.53M"


@dataclass
class Bench:
    """State shared by the sections of one run: scratch folders, the MLflow store, model
    folders, and the ablate steps the TRL section measured (reused for FLOPs)."""

    options: SuiteOptions
    scratch: Path
    progress: Callable[[str], None]
    steps: dict[StepCase, list[StepRecord]] = field(default_factory=dict)
    _store: Any = None
    _trackers: list[Any] = field(default_factory=list)

    def folder(self, size: str) -> Path:
        from devtools.bench.models import model_dir

        return model_dir(size, self.scratch)

    def tracker(self, label: str):
        """A fresh real MLflow run (sqlite in the scratch folder) for one benchmark case."""
        from ablate.tracking import default_uri, open_store

        if self._store is None:
            store = open_store(default_uri(self.scratch / "mlflow"))
            store.init()
            self._store = store.open_study("ablate-bench")
        case_id = f"case-{len(self._trackers) + 1}"
        self._trackers.append(self._store.trial_tracker(case_id, run_name=label, tags={}))
        return self._trackers[-1]

    def close(self) -> None:
        """Finish every MLflow run opened (their buffered metrics sent) before the scratch store
        is deleted."""
        for tracker in self._trackers:
            tracker.close()
        self._trackers.clear()

    def ablate_steps(self, case: StepCase) -> list[StepRecord]:
        """Timed ablate steps of `case`: the TRL section's if it ran, else measured now."""
        if case not in self.steps:
            self.progress(f"ablate steps {case.label}")
            o = self.options
            stepper = AblateStepper(case, self.folder(case.size), self.tracker(case.label))
            runs = interleave({"ablate": stepper.step}, o.repeats, o.warmup)
            self.steps[case] = runs.results["ablate"]  # type: ignore[assignment]
        return self.steps[case]

    def rl_cases(self) -> list[StepCase]:
        return [StepCase(s, 8, 8, t) for s in self.options.sizes for t in self.options.lengths]


def section_trl(bench: Bench) -> list[Row]:
    from devtools.bench.trl_step import require_trl, run_pair

    require_trl()
    o, rows = bench.options, []
    for case in bench.rl_cases():
        bench.progress(f"ablate vs TRL {case.label}")
        tracker = bench.tracker(case.label)
        pair = run_pair(case, bench.folder(case.size), tracker, o.repeats, o.warmup)
        bench.steps[case] = pair.ablate
        walls = [r.wall for r in pair.ablate]
        label = f"{case.size} T={case.new_tokens}"
        rows += rows_for("trl", label, "s", {"ablate step": walls, "trl step": pair.trl})
        target = TRL_TARGETS.get(case.size)
        rows.append(
            Row("trl", label, "ablate / trl", "ratio", ratio_summary(walls, pair.trl), target)
        )
    return rows


def section_rollout(bench: Bench) -> list[Row]:
    from ablate.models import load_model
    from devtools.bench.rollout import bench_case

    o, rows = bench.options, []
    for size in o.sizes:
        model, tokenizer = load_model(bench.folder(size))
        for prompts, group in o.rollout_shapes:
            label = f"{size} {prompts}x{group} T={o.rollout_tokens}"
            bench.progress(f"rollout {label}")
            seconds = bench_case(model, tokenizer, prompts, group, o.rollout_tokens, o.repeats)
            tokens = prompts * group * o.rollout_tokens
            rates = {f"{name} tok/s": [tokens / s for s in v] for name, v in seconds.items()}
            rows += rows_for("rollout", label, "tok/s", rates)
            ratio = ratio_summary(rates["ours tok/s"], rates["generate tok/s"])
            rows.append(
                Row("rollout", label, "ours / generate", "ratio", ratio, ROLLOUT_TARGETS.get(size))
            )
    return rows


def section_flops(bench: Bench) -> list[Row]:
    from ablate.factors.critic import num_params
    from ablate.models import load_model
    from devtools.bench.flops import matmul_peak

    o = bench.options
    bench.progress(f"matmul peak over n = {', '.join(map(str, o.peak_sizes))}")
    measured = matmul_peak(o.peak_sizes, o.peak_rounds, o.peak_seconds)
    rows = [
        Row("flops", f"matmul n={n}", "fp32 a @ b", "GFLOP/s", summarize(v))
        for n, v in measured.items()
    ]
    peak = max(summarize(v).median for v in measured.values()) * 1e9
    for case in bench.rl_cases():
        records = bench.ablate_steps(case)
        params = num_params(load_model(bench.folder(case.size))[0])
        rows += utilisation_rows(case, records, params, peak)
    return rows


def utilisation_rows(
    case: StepCase, records: list[StepRecord], params: int, peak: float
) -> list[Row]:
    """Train-step (targeted) and whole-step utilisation in % of `peak` FLOP/s, per step."""
    from devtools.bench.flops import step_flops, train_flops, utilisation

    label = f"{case.size} T={case.new_tokens}"
    train = [
        100 * utilisation(train_flops(params, r.update_tokens), r.train, peak) for r in records
    ]
    whole = [100 * utilisation(step_flops(params, r.update_tokens), r.wall, peak) for r in records]
    target = FLOPS_TARGETS.get(case.size)
    return [
        Row("flops", label, "train-step utilisation", "%", summarize(train), target),
        Row("flops", label, "whole-step utilisation", "%", summarize(whole)),
        *rows_for("flops", label, "tokens", {"update tokens": [r.update_tokens for r in records]}),
    ]


def overhead_share(records: list[StepRecord]) -> float:
    """Percent of the steps' wall time spent in diagnostics and tracking (sums, so that the
    tracker's periodic flushes are amortised over the steps they cover)."""
    return 100 * sum(r.harness for r in records) / sum(r.wall for r in records)


def section_overhead(bench: Bench) -> list[Row]:
    from ablate.base.store.common import FLUSH_EVERY_STEPS

    o, rows = bench.options, []
    for size in o.sizes:
        case = StepCase(size, 8, 8, o.lengths[0])
        label = f"{size} T={case.new_tokens}"
        bench.progress(
            f"harness overhead {label}: {o.overhead_windows} × {FLUSH_EVERY_STEPS} steps"
        )
        tracker = bench.tracker(f"overhead {label}")
        stepper = AblateStepper(case, bench.folder(size), tracker)
        for _ in range(o.warmup):
            stepper.step()
        tracker.flush()  # timed windows start with an empty buffer, so each holds one flush
        windows = [
            [stepper.step() for _ in range(FLUSH_EVERY_STEPS)] for _ in range(o.overhead_windows)
        ]
        flat = [r for w in windows for r in w]
        share = summarize([overhead_share(w) for w in windows])
        rows.append(
            Row(
                "overhead",
                label,
                "harness share",
                "%",
                share,
                OVERHEAD_TARGET,
                f"windows of {FLUSH_EVERY_STEPS} steps",
            )
        )
        ms = {
            "diagnostics": [1e3 * r.diagnostics for r in flat],
            "tracking": [1e3 * r.tracking for r in flat],
            "step": [1e3 * r.wall for r in flat],
        }
        rows += rows_for("overhead", label, "ms", ms)
    return rows


def section_scaling(bench: Bench) -> list[Row]:
    from devtools.bench.scaling import step_rows, sweep_cases

    o = bench.options
    cases, base = sweep_cases(SCALING_SIZE, o.scaling_groups, o.scaling_lengths)
    bench.progress(f"step cost vs G and T: {len(cases)} cases interleaved")
    folder = bench.folder(SCALING_SIZE)
    return step_rows(cases, base, folder, bench.tracker, o.repeats, o.warmup)


def section_study(bench: Bench) -> list[Row]:
    from devtools.bench.scaling import study_rows

    o = bench.options
    folder = bench.scratch / "study"
    return study_rows(
        o.study_trials, o.study_workers, folder, o.study_repeats, o.study_steps, bench.progress
    )


def section_natural(bench: Bench) -> list[Row]:
    from devtools.bench.natural import section_natural as run

    return run(bench)


def section_profile(bench: Bench) -> list[Row]:
    from devtools.bench.profile import section_profile as run

    return run(bench)


def section_batching(bench: Bench) -> list[Row]:
    from devtools.bench.batching import section_batching as run

    return run(bench)


def section_vllm_cpu(bench: Bench) -> list[Row]:
    from devtools.bench.vllm_cpu import section_vllm_cpu as run

    return run(bench)


SECTION_RUNNERS: dict[str, Callable[[Bench], list[Row]]] = {
    "trl": section_trl,
    "natural": section_natural,
    "profile": section_profile,
    "rollout": section_rollout,
    "flops": section_flops,
    "overhead": section_overhead,
    "scaling": section_scaling,
    "study": section_study,
    "batching": section_batching,
    "vllm_cpu": section_vllm_cpu,
}


def run_suite(options: SuiteOptions, progress: Callable[[str], None] = print) -> list[Row]:
    """Every selected section in the fixed order of SECTIONS, at `options.threads` threads."""
    import torch

    if options.threads:
        torch.set_num_threads(options.threads)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="ablate-bench-") as scratch:
        bench = Bench(options, Path(scratch), progress)
        try:
            for name in SECTIONS:
                if name in options.sections:
                    progress(f"— section {name}")
                    rows += SECTION_RUNNERS[name](bench)
        finally:
            bench.close()
    return rows
