"""`python -m devtools control-detection RESULTS STUDY --control ARM=EFFECT ...`: how often a
control (or any arm) would be detected against the reference at n seeds × J problems × K
samples, simulated from a pilot's measured variance components (`ablate plan`'s, the eval noise
of the difference from the paired per-sample outcomes), at the effect declared for it.

Each row: the share of simulated re-runs whose crossed t test rejects at alpha, with the pilot's
point estimates and with the seed term at its 80% upper bound; the seed count a design needs is
read off the first (issue 42: the quickstart's positive control needs 5 seeds for 90%).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ablate.base.errors import ConfigError
from ablate.report.stats import design, plan_power
from ablate.report.stats.pilot import load_pilot, pilot_pair


def _controls(items: list[str]) -> list[tuple[str, float]]:
    out = []
    for item in items:
        name, _, effect = item.partition("=")
        try:
            out.append((name, float(effect)))
        except ValueError:
            message = f"--control takes ARM=EFFECT, e.g. grpo_random=-0.25; got {item!r}"
            raise ConfigError(message) from None
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devtools control-detection", description=__doc__)
    p.add_argument("results", help="the pilot's results folder")
    p.add_argument("study", help="the pilot's study name")
    p.add_argument("--control", action="append", default=[], help="ARM=EFFECT (repeatable)")
    p.add_argument("--tracking-uri", default=None, help="the pilot's store, if not mlflow.db")
    p.add_argument("--reference", default="grpo")
    p.add_argument("--model", default="rl_ready")
    p.add_argument("--template", default="plain")
    p.add_argument("--seeds", default="3,4,5,6,8", help="seed counts to simulate")
    p.add_argument("--problems", type=int, default=256)
    p.add_argument("--samples", type=int, default=2)
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--studies", type=int, default=2000, help="simulated re-runs per cell")
    args = p.parse_args(argv)
    start = time.perf_counter()
    pilot = load_pilot(args.results, args.study, args.tracking_uri)
    seeds = [int(s) for s in args.seeds.split(",")]
    shape = f"{args.problems} problems × {args.samples} samples, alpha {args.alpha:g}"
    print(f"detection in {args.studies} simulated re-runs at n seeds × {shape}: point (80% up)")
    for arm, effect in _controls(args.control):
        pair = pilot_pair(pilot, arm, args.reference, args.model, args.template)
        if pair is None:
            raise ConfigError(f"the pilot has no 2 shared seeds of {arm!r} and {args.reference!r}")
        c = design.contrast_components(pair.arm, pair.ref, pilot.samples, pair.draws)
        measured = pair.arm.mean() - pair.ref.mean()
        sds = "  ".join(
            f"{k} {np.sqrt(v):.3f}"
            for k, v in (
                ("seed", c.seed_var),
                ("arm×problem", c.problem_var),
                ("seed×problem", c.sp_var),
                ("per sample Δ", c.sample_var),
            )
        )
        print(
            f"{arm}: declared {effect:+.3g}, measured {measured:+.4f} over {c.n} seeds; SDs {sds}"
        )
        cells = []
        for n in seeds:
            power = [
                plan_power.simulate_power(
                    comp, n, args.problems, args.samples, abs(effect), args.alpha, args.studies, n
                )
                for comp in (c, design.at_upper_bound(c))
            ]
            cells.append(f"n={n}: {power[0]:.3f} ({power[1]:.3f})")
        print("   " + "  ".join(cells))
    print(f"({time.perf_counter() - start:.1f} s)")
    return 0
