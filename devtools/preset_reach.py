"""Train every preset in `baselines/` for 50 steps on the RL-ready rung and tabulate whether it
diverged, its pass@1 before and after, and what its surrogate clipped, gated or selected.

    OMP_NUM_THREADS=1 .venv/bin/python -m devtools preset-reach [--steps 50] [--seed 0] [PRESET ...]

One seed, one trial per preset, the default budget (8 prompts × G = 8, 80 new tokens) and a
64-problem held-out evaluation at the start and the end. A smoke check of each recipe's
mechanics, not a comparison (that needs seeds: studies/factor_grid.py).
"""

from __future__ import annotations

import argparse
import statistics
import time

from ablate.baselines import baseline, baseline_names
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.tracking import MemoryTracker
from ablate.trial import train

#: per-step policy statistics worth a column: (metric, column head)
COLUMNS = (
    ("policy/clip_frac", "clip"),
    ("policy/is_weight_truncated_frac", "cispo trunc"),
    ("policy/sapo_gate_mean", "sapo gate"),
    ("policy/gmpo_clip_frac_high", "gmpo clip+"),
    ("policy/cov_selected_frac", "cov sel"),
    ("data/kept_group_frac", "kept grp"),
    ("policy/entropy", "entropy"),
)


def run(name: str, steps: int, seed: int) -> dict[str, str]:
    spec = TrialSpec(
        algorithm=baseline(name),
        model="rl_ready",
        seed=seed,
        budget=Budget(max_steps=steps),
        eval=EvalSpec(every=0, max_problems=64),
    )
    tracker = MemoryTracker()
    t0 = time.perf_counter()
    result = train(spec, tracker=tracker)
    row = {"preset": name, "outcome": result.outcome, "wall s": f"{time.perf_counter() - t0:.0f}"}
    first = tracker.history("eval/pass_at_1")
    row["pass@1 start"] = f"{first[0][1]:.3f}" if first else "-"
    row["pass@1 end"] = f"{first[-1][1]:.3f}" if len(first) > 1 else "-"
    for key, head in COLUMNS:
        values = [v for _, v in tracker.history(key)]
        row[head] = f"{statistics.fmean(values):.4f}" if values else "-"
    return row


def markdown(rows: list[dict[str, str]]) -> str:
    heads = list(rows[0])
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(r[h] for h in heads) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools preset-reach", description=__doc__.splitlines()[0]
    )
    parser.add_argument("presets", nargs="*", default=list(baseline_names()))
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = []
    for name in args.presets:
        rows.append(run(name, args.steps, args.seed))
        print(f"{name}: {rows[-1]}", flush=True)
    print(markdown(rows))
    return 0
