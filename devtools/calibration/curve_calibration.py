"""Are the curve report's intervals and marks calibrated? Checked on simulated trajectories
(`curve_model`: per-seed curves, AR(1) wander of the training path, eval noise partly shared
across a trial's evals), each study analysed exactly as the report analyses it
(`analysis.analyse`, `analysis.arm_curve`, `compare.contrasts`).

For every interval the report shows: its coverage of what it estimates (`curve_model.truths`),
counted over the studies that show it; how often A is withheld (not identified); how often an
A is shown whose interval misses (over all studies). For the marks: how often two arms drawn
from one truth are marked different, and how often an arm's forecast "departs".

    python -m devtools curve-calibration [studies [scenario]]   # the README's tables
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from ablate.factors.eval_spec import CurveSpec
from ablate.report.curves.analysis import ArmCurves, analyse, arm_curve
from ablate.report.curves.compare import contrasts
from ablate.report.curves.pooled import PooledFit
from ablate.report.stats.inference import ALPHA
from devtools.calibration.curve_model import CurveModel, seed_curve, truths

INTERVALS = ("a", "b", "c_mid", "slope", "to_target")


def simulate_arm(
    model: CurveModel,
    rng: np.random.Generator,
    name: str,
    seeds: int,
    *,
    checks: str = "none",
    fit: bool = True,
):
    """One simulated arm as the report analyses it (`fit` False: no pooled fit, for the
    slope and the compute to the target only)."""
    spec = CurveSpec(warmup=model.warmup, target=model.target)
    fits = [analyse(seed_curve(model, rng, name, s), spec, diagnostics=False) for s in range(seeds)]
    if not fit:
        return ArmCurves(name, fits, PooledFit())
    return arm_curve(name, fits, spec, checks=checks)


def _intervals(arm) -> dict[str, object]:
    out = {k: arm.estimate(k) for k in ("a", "b", "c_mid")} if arm.pooled.identified else {}
    out["slope"] = arm.slope()
    if arm.reached()[0]:
        out["to_target"] = arm.to_target()
    return out


def coverage(model: CurveModel, seeds: int, studies: int, seed: int = 0) -> dict[str, float]:
    """Coverage of each interval shown (NaN where none was), the share of studies that withhold
    A, and the share that show an A whose interval misses the truth."""
    rng = np.random.default_rng([seed, seeds])
    truth = truths(model)
    hits: dict[str, list[bool]] = {k: [] for k in INTERVALS}
    for _ in range(studies):
        for name, e in _intervals(simulate_arm(model, rng, "arm", seeds)).items():
            if np.isfinite(e.low):
                hits[name].append(bool(e.low <= truth[name] <= e.high))
    out = {k: float(np.mean(v)) if v else float("nan") for k, v in hits.items()}
    out["withheld"] = 1.0 - len(hits["a"]) / studies
    out["A shown and wrong"] = float(np.sum(~np.array(hits["a"], dtype=bool))) / studies
    return out


def null_marks(
    model: CurveModel, seeds: int, studies: int, seed: int = 0, other: CurveModel | None = None
) -> dict[str, float]:
    """How often the comparison rule marks two arms drawn from `model` (or the second from
    `other`: then the rates are its power), and how often the reference's forecast departs."""
    rng = np.random.default_rng([seed, seeds, 1])
    spec = CurveSpec(warmup=model.warmup, target=model.target)
    marks = {k: 0 for k in ("A", "B", "slope", "to_target", "forecast departs")}
    for _ in range(studies):
        ref = simulate_arm(model, rng, "ref", seeds, checks="forecast")
        arm = simulate_arm(other or model, rng, "arm", seeds)
        (row,) = contrasts([ref, arm], "ref", spec)
        marks["A"] += row.a_differs
        marks["B"] += row.b_ratio is not None and row.p_b < ALPHA
        marks["slope"] += row.p_slope < ALPHA
        marks["to_target"] += row.p_target < ALPHA
        marks["forecast departs"] += ref.forecast.departs
    return {k: v / studies for k, v in marks.items()}


#: the README's rows: ScaleRL's seed spread with realistic trajectory noise; twice the wander;
#: curves like studies/compute_curves.py's (still rising towards an A near the ceiling); curves
#: observed only up to half their midpoint; curves that rose before their first fitted eval and
#: levelled off (A identified, B and C_mid not)
SCENARIOS = {
    "A 0.85, wander SD 0.015": CurveModel(),
    "A 0.85, wander SD 0.03": CurveModel(wander_sd=0.03),
    "near the ceiling: A 0.99, C_mid 2.2M": CurveModel(
        a=0.99, b=0.9, c_mid=2_200_000.0, a_sd=0.005
    ),
    "seen to half the midpoint: C_mid 12M": CurveModel(c_mid=12_000_000.0),
    "rose before the first eval: A 0.7, C_mid 100k": CurveModel(a=0.7, b=2.0, c_mid=100_000.0),
}


def _cell(x: float) -> str:
    return "–" if not np.isfinite(x) else f"{x:.3f}"


def tables(
    studies: int = 400,
    seed_counts: tuple[int, ...] = (3, 5, 10),
    only: str | None = None,
    power: bool = True,
    null_studies: int | None = None,
) -> None:
    nulls = null_studies or studies
    print(f"{studies} studies per row ({nulls} pairs of arms for the null marks); R0 0.52,")
    print("1024 eval samples per point (half their noise")
    print("shared by a trial's evals), AR(1) wander with lag-1 correlation 0.7; the study's")
    print("schedule to 6M tokens; target 0.7. Coverage of the 95% intervals shown (– : none shown)")
    cols = ["scenario", "seeds", "A", "B", "C_mid", "slope", "to 0.7", "A withheld"]
    cols += [
        "A shown, wrong",
        "null: A",
        "null: B",
        "null: slope",
        "null: to 0.7",
        "forecast departs",
    ]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for name, model in SCENARIOS.items():
        if only is not None and only not in name:
            continue
        for n in seed_counts:
            c, z = coverage(model, n, studies), null_marks(model, n, nulls)
            cells = [c[k] for k in INTERVALS] + [c["withheld"], c["A shown and wrong"]]
            cells += [z[k] for k in ("A", "B", "slope", "to_target", "forecast departs")]
            print(f"| {name} | {n} | " + " | ".join(_cell(x) for x in cells) + " |", flush=True)
    if power:
        power_table(studies // 2, only)


def reach_nulls(model: CurveModel, seeds: int, studies: int, seed: int = 0) -> dict[str, float]:
    """The null mark rates of the slope and the compute to the target alone: they need no
    sigmoid fit, so many more studies fit in the time (Monte-Carlo error 0.007 at 1000)."""
    rng = np.random.default_rng([seed, seeds, 2])
    spec = CurveSpec(warmup=model.warmup, target=model.target)
    marks = {"slope": 0, "to_target": 0}
    for _ in range(studies):
        ref, arm = (simulate_arm(model, rng, name, seeds, fit=False) for name in ("ref", "arm"))
        (row,) = contrasts([ref, arm], "ref", spec)
        marks["slope"] += row.p_slope < ALPHA
        marks["to_target"] += row.p_target < ALPHA
    return {k: v / studies for k, v in marks.items()}


def reach_table(studies: int, seed_counts: tuple[int, ...], only: str | None = None) -> None:
    print(f"\nnull marks of the slope and the compute to 0.7, {studies} pairs of arms per row")
    print("| scenario | seeds | null: slope | null: to 0.7 |\n|---|---|---|---|")
    for name, model in SCENARIOS.items():
        if only is not None and only not in name:
            continue
        for n in seed_counts:
            z = reach_nulls(model, n, studies)
            print(f"| {name} | {n} | {z['slope']:.3f} | {z['to_target']:.3f} |", flush=True)


def power_table(studies: int, only: str | None = None) -> None:
    """How often the rule detects an arm whose B is doubled or whose A is 0.05 lower."""
    print(f"\npower at 5 seeds, {studies} studies per row")
    print("| scenario | difference | A marked | B marked | slope marked | to 0.7 marked |")
    print("|---|---|---|---|---|---|")
    for name, model in SCENARIOS.items():
        if (only is not None and only not in name) or "0.03" in name:
            continue
        for label, other in (
            ("B × 2", replace(model, b=2 * model.b)),
            ("A − 0.05", replace(model, a=model.a - 0.05)),
        ):
            z = null_marks(model, 5, studies, other=other)
            cells = " | ".join(f"{z[k]:.3f}" for k in ("A", "B", "slope", "to_target"))
            print(f"| {name} | {label} | {cells} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools curve-calibration", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "studies", nargs="?", type=int, default=400, help="studies per row (0: no coverage table)"
    )
    parser.add_argument("scenario", nargs="?", help="only the scenarios whose name contains this")
    parser.add_argument("--seeds", default="3,5,10", help="seed counts, comma-separated")
    parser.add_argument("--no-power", action="store_true", help="skip the power table")
    parser.add_argument("--null-studies", type=int, help="pairs of arms per null row")
    parser.add_argument(
        "--reach-studies",
        type=int,
        default=0,
        help="pairs of arms per row of the slope and "
        "compute-to-target null table (fits not needed; 0: no table)",
    )
    args = parser.parse_args(argv)
    counts = tuple(int(x) for x in args.seeds.split(","))
    if args.studies:
        tables(args.studies, counts, args.scenario, not args.no_power, args.null_studies)
    if args.reach_studies:
        reach_table(args.reach_studies, counts, args.scenario)
    return 0
