"""Are the curve report's intervals and marks calibrated? Checked on simulated trajectories
(`curve_model`: per-seed curves, AR(1) wander of the training path, eval noise partly shared
across a trial's evals), each study analysed exactly as the report analyses it
(`analysis.analyse`, `analysis.arm_curve`, `compare.contrasts`).

For every interval the report shows: its coverage of what it estimates (`curve_model.truths`),
counted over the studies that show it; how often A is withheld (not identified), and how often
the fit's rules alone (ceiling, midpoint, B; no evidence of a bend) would have withheld it; how
often an A is shown whose interval misses (over all studies). For the marks: how often two arms
drawn from one truth are marked different, and how often an arm's forecast "departs". On curves
the sigmoid does not describe (PLATEAU_SCENARIOS): how often a plateau is claimed where none is
seen.

    python -m devtools curve-calibration [studies [scenario]]   # the README's tables
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from ablate.factors.eval_spec import CurveSpec
from ablate.report.curves.analysis import ArmCurves, analyse, arm_curve
from ablate.report.curves.compare import contrasts
from ablate.report.curves.pooled import PooledFit, unidentified
from ablate.report.stats.inference import ALPHA
from devtools.calibration.curve_model import CurveModel, seed_curve, truths
from devtools.calibration.gates import Gate, at_most, within

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


def _fit_rules_a(arm: ArmCurves) -> object | None:
    """The A interval the fit's rules alone would show (no evidence of a bend asked), or None."""
    if unidentified(replace(arm.pooled, bend=None)):
        return None
    alone = replace(arm.pooled, unidentified="", shape_unidentified="")
    return replace(arm, pooled=alone).estimate("a")


def _covers(e, truth: float) -> bool:
    return bool(e.low <= truth <= e.high)  # False for a NaN truth: any A shown is wrong


def coverage(model: CurveModel, seeds: int, studies: int, seed: int = 0) -> dict[str, float]:
    """Coverage of each interval shown (NaN where none was), the share of studies that withhold
    A, the share that show an A whose interval misses the truth ("A shown and wrong") or the
    final asymptote ("A shown, misses final"; a second rise after the compute), and the same
    two rates for the fit's rules alone."""
    rng = np.random.default_rng([seed, seeds])
    truth = truths(model)
    hits: dict[str, list[bool]] = {k: [] for k in INTERVALS}
    final, alone = [], []
    for _ in range(studies):
        arm = simulate_arm(model, rng, "arm", seeds)
        for name, e in _intervals(arm).items():
            if np.isfinite(e.low):
                hits[name].append(_covers(e, truth[name]))
                if name == "a":
                    final.append(_covers(e, truth["a final"]))
        if (e := _fit_rules_a(arm)) is not None and np.isfinite(e.low):
            alone.append(_covers(e, truth["a"]))
    out = {k: float(np.mean(v)) if v else float("nan") for k, v in hits.items()}
    out["withheld"] = 1.0 - len(hits["a"]) / studies
    out["A shown and wrong"] = float(np.sum(~np.array(hits["a"], dtype=bool))) / studies
    out["A shown, misses final"] = float(np.sum(~np.array(final, dtype=bool))) / studies
    out["fit rules: withheld"] = 1.0 - len(alone) / studies
    out["fit rules: A shown and wrong"] = float(np.sum(~np.array(alone, dtype=bool))) / studies
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
#: the same curve levelling off within the compute (midpoint 15× inside it); curves like
#: studies/compute_curves.py's (still rising towards an A near the ceiling); curves observed
#: only up to half their midpoint; curves that rose before their first fitted eval and levelled
#: off (A identified, B and C_mid not)
SCENARIOS = {
    "A 0.85, wander SD 0.015": CurveModel(),
    "A 0.85, wander SD 0.03": CurveModel(wander_sd=0.03),
    "levelled within the compute: A 0.85, C_mid 400k": CurveModel(c_mid=400_000.0),
    "near the ceiling: A 0.99, C_mid 2.2M": CurveModel(
        a=0.99, b=0.9, c_mid=2_200_000.0, a_sd=0.005
    ),
    "seen to half the midpoint: C_mid 12M": CurveModel(c_mid=12_000_000.0),
    "rose before the first eval: A 0.7, C_mid 100k": CurveModel(a=0.7, b=2.0, c_mid=100_000.0),
}


_TWO_PHASES = CurveModel(shape="two-phase", a=0.75, b=1.5, c_mid=200_000.0, gain2=0.12)

#: curves ScaleRL's sigmoid does not describe, where a plateau must not be claimed that the
#: data do not show: drift linear in log compute (no plateau within or far beyond the compute);
#: a plateau, then a second rise after the observed compute (the plateau seen is the truth of
#: "plateau suggested within the observed compute"; the final asymptote is out of sight) or
#: within it (still rising at the end: no plateau seen)
PLATEAU_SCENARIOS = {
    "line in log compute: 0.12 per decade": CurveModel(shape="log-linear"),
    "line in log compute: 0.05 per decade": CurveModel(shape="log-linear", slope=0.05),
    "two phases, second rise after the compute: 0.75, +0.12 at 60M": replace(
        _TWO_PHASES, c_mid2=60_000_000.0
    ),
    "two phases, second rise within it: 0.75, +0.12 at 3M": replace(
        _TWO_PHASES, c_mid2=3_000_000.0
    ),
}


def _matching(scenarios: dict[str, CurveModel], only: str | None) -> dict[str, CurveModel]:
    return {k: v for k, v in scenarios.items() if only is None or only in k}


def plateau_table(studies: int, seed_counts: tuple[int, ...], only: str | None = None) -> None:
    """How often a plateau is claimed on the curves of PLATEAU_SCENARIOS, and how often it is
    wrong, with the rule and with the fit's rules alone."""
    chosen = _matching(PLATEAU_SCENARIOS, only)
    if not chosen:
        return
    print(f"\nplateau claims on curves the sigmoid does not describe, {studies} studies per row")
    cols = ["scenario", "seeds", "plateau shown", "A", "A shown, wrong", "A shown, misses final"]
    cols += ["fit rules alone: shown", "fit rules alone: shown, wrong", "slope", "to 0.7"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    keys = ("a", "A shown and wrong", "A shown, misses final")
    for name, model in chosen.items():
        for n in seed_counts:
            c = coverage(model, n, studies)
            cells = [1 - c["withheld"], *(c[k] for k in keys), 1 - c["fit rules: withheld"]]
            cells += [c["fit rules: A shown and wrong"], c["slope"], c["to_target"]]
            print(f"| {name} | {n} | " + " | ".join(_cell(x) for x in cells) + " |", flush=True)


def adversarial_gates(studies: int, seed: int = 0) -> list[Gate]:
    """The curve report's gates off its default model: a plateau shown on a line in log compute
    at most 5% (3, 5 and 10 seeds); a two-phase curve's A shown with an interval that misses
    the plateau seen within the compute at most 5% (3 and 5 seeds); A's coverage on a curve
    levelled within the compute in [0.93, 0.97] over the studies that show it (5 seeds). About
    20 s at 100 studies on one core."""
    line = PLATEAU_SCENARIOS["line in log compute: 0.12 per decade"]
    gates = []
    for n in (3, 5, 10):
        c = coverage(line, n, studies, seed)
        name = f"curves: plateau shown on a line in log compute, {n} seeds"
        gates.append(at_most(name, 1 - c["withheld"], 0.05, studies))
    for name, model in PLATEAU_SCENARIOS.items():
        for n in (3, 5) if model.shape == "two-phase" else ():
            c = coverage(model, n, studies, seed)
            label = f"curves: A shown and wrong, {name}, {n} seeds"
            gates.append(at_most(label, c["A shown and wrong"], 0.05, studies))
    name = "levelled within the compute: A 0.85, C_mid 400k"
    c = coverage(SCENARIOS[name], 5, studies, seed)
    shown = round(studies * (1 - c["withheld"]))
    gates.append(within(f"curves: A coverage, {name}, 5 seeds", c["a"], 0.93, 0.97, shown))
    return gates


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
    chosen = _matching(SCENARIOS, only)
    if not chosen:
        return
    print(f"{studies} studies per row ({nulls} pairs of arms for the null marks); R0 0.52,")
    print("1024 eval samples per point (half their noise")
    print("shared by a trial's evals), AR(1) wander with lag-1 correlation 0.7; the study's")
    print("schedule to 6M tokens; target 0.7. Coverage of the 95% intervals shown (– : none shown)")
    cols = ["scenario", "seeds", "A", "B", "C_mid", "slope", "to 0.7", "A withheld"]
    cols += [
        "withheld by the fit rules alone",
        "A shown, wrong",
        "null: A",
        "null: B",
        "null: slope",
        "null: to 0.7",
        "forecast departs",
    ]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for name, model in chosen.items():
        for n in seed_counts:
            c, z = coverage(model, n, studies), null_marks(model, n, nulls)
            cells = [c[k] for k in INTERVALS]
            cells += [c[k] for k in ("withheld", "fit rules: withheld", "A shown and wrong")]
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
        plateau_table(args.studies, counts, args.scenario)
    if args.reach_studies:
        reach_table(args.reach_studies, counts, args.scenario)
    return 0
