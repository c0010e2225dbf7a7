"""Where a natural-length RL step's time goes: the bench's natural case (GRPO without KL,
8 prompts × G = 8, up to 80 new tokens ending at EOS) timed phase by phase, then the top
operators of sampling and of the update under torch's profiler.

    OMP_NUM_THREADS=1 .venv/bin/python -m devtools profile-step --model 0.53M [--steps 6]
    OMP_NUM_THREADS=1 .venv/bin/python -m devtools profile-step --model 4.2M

--model takes a benchmark size (its natural-length model: rl_ready, the warm-started 4.2M), a
zoo name or a model folder.

It uses only trainer APIs that predate ragged decoding and packed updates, so the same tool run
against an older checkout profiles the code before them: start it from that checkout's root with
this tree on the path (`cd <checkout> && PYTHONPATH=<this tree> python -m devtools profile-step`;
`python -m` puts the current folder first, so `ablate` comes from the checkout). Phases are
medians over the timed steps; the operator tables sum them. On a shared machine compare shares,
not absolute times.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from devtools.bench.phases import PHASES, phase_seconds


def run(model: str, steps: int, warmup: int, top: int) -> None:
    """`warmup` untimed steps, `steps` timed ones, then `steps` more under the profiler (kept
    apart: starting and stopping it costs more than a step)."""
    from ablate.trial import rl_step

    rows, (setup, state, stream, clock) = phase_seconds(model, steps, warmup)
    clock.profiles = {
        "sampling": torch.profiler.profile(acc_events=True),
        "update": torch.profiler.profile(acc_events=True),
    }
    for _ in range(steps):
        rl_step(setup, state, stream)
    report(rows, clock.profiles, top)


def report(rows: dict[str, list[float]], profiles: dict, top: int) -> None:
    step = statistics.median(rows["step"])
    print(
        f"step {step:.3f} s (median of {len(rows['step'])}), mean completion length "
        f"{statistics.median(rows['length']):.1f} tokens"
    )
    for p in PHASES:
        median = statistics.median(rows[p])
        print(f"  {p:<10} {median:7.3f} s  {100 * median / step:5.1f}%")
    for name, prof in profiles.items():
        events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total = sum(e.self_cpu_time_total for e in events)
        print(f"\n{name}: top operators by self time ({total / 1e6:.3f} s over the steps)")
        for e in events[:top]:
            share = 100 * e.self_cpu_time_total / total
            print(f"  {e.key[:48]:<48} {share:5.1f}%  {e.count:6d} calls")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools profile-step", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--model", default="0.53M", help="0.53M, 4.2M, a zoo name or a folder")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    run(args.model, args.steps, args.warmup, args.top)
    return 0
