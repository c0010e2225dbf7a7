"""Are the curve fits' seed intervals calibrated? Checked on simulated studies.

A simulated arm: seed s draws its own curve parameters around the arm's (A_s ~ N(A, a_sd²),
ln B_s ~ N(ln B, log_sd²), ln C_mid_s ~ N(ln C_mid, log_sd²)), is evaluated before training and
at each point of a compute schedule, each eval a binomial mean over `evals` samples (pass@1's
sampling noise; problem heterogeneity would only lower it), and is fitted exactly as the report
fits it (`curves.window`'s warm-up cut, `curvefit.fit_sigmoid` with the observed R0). The
report's intervals over the fitted seeds (`curves.seed_interval`) must cover the arm's A, B and
C_mid (B and C_mid: the geometric means the log intervals estimate) 95% of the time.

    python -m ablate.report.curve_calibration [studies]   # the README's coverage table
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ablate.report.curvefit import fit_sigmoid, sigmoid
from ablate.report.curves import seed_interval


def schedule(first: float, per_decade: int, every: float, end: float) -> np.ndarray:
    """The eval points of a log-spaced cadence from `first` plus a linear one every `every`,
    up to `end` (included): a study's `EvalSpec(log_from, log_per_decade, every_tokens)`."""
    k = np.arange(int(np.floor(per_decade * np.log10(end / first))) + 1)
    log = first * 10 ** (k / per_decade)
    linear = np.arange(every, end + every / 2, every)
    return np.unique(np.concatenate([log, linear, [end]]))


#: studies/compute_curves.py's schedule: 4 per decade from 20k, every 500k, to 6M tokens
STUDY_SCHEDULE = schedule(20_000, 4, 500_000, 6_000_000)


@dataclass(frozen=True)
class CurveModel:
    """Defaults: the scale of studies/compute_curves.py's GRPO curves."""

    a: float = 0.85
    b: float = 1.2
    c_mid: float = 1_500_000.0
    r0: float = 0.52
    a_sd: float = 0.015  # ScaleRL: A varied by ±0.015 over 3 runs
    log_sd: float = 0.15  # seed SD of ln B and ln C_mid
    evals: int = 1024  # eval samples per point (128 problems × 8)
    warmup: float = 50_000.0
    points: tuple[float, ...] = tuple(STUDY_SCHEDULE)


def simulate_seed(model: CurveModel, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """(compute, observed pass@1, observed R0, true A, B, C_mid of the seed)."""
    a = model.a + model.a_sd * rng.standard_normal()
    b, c_mid = np.exp(np.log([model.b, model.c_mid]) + model.log_sd * rng.standard_normal(2))
    c = np.asarray(model.points, dtype=float)
    truth = sigmoid(c, a, b, c_mid, model.r0)
    r = rng.binomial(model.evals, np.clip(truth, 0, 1)) / model.evals
    r0 = rng.binomial(model.evals, model.r0) / model.evals
    return c, r, float(r0), np.array([a, b, c_mid])


def fit_seed(model: CurveModel, rng: np.random.Generator) -> np.ndarray:
    """(A, B, C_mid) fitted to one simulated seed (NaN when the fit is refused)."""
    c, r, r0, _ = simulate_seed(model, rng)
    keep = c > model.warmup
    fit = fit_sigmoid(c[keep], r[keep], r0)
    return np.array([fit.a, fit.b, fit.c_mid]) if fit.ok else np.full(3, np.nan)


def coverage(model: CurveModel, seeds: int, studies: int, seed: int = 0) -> dict[str, float]:
    """Coverage of the A, B and C_mid intervals over `studies` studies of `seeds` seeds, the
    share of seeds refused a fit, and of studies left with too few fits for an interval."""
    rng = np.random.default_rng([seed, seeds])
    truth = {"A": model.a, "B": model.b, "C_mid": model.c_mid}
    hits: dict[str, list[bool]] = {k: [] for k in truth}
    refused, no_interval = 0, 0
    for _ in range(studies):
        fits = np.array([fit_seed(model, rng) for _ in range(seeds)])  # [seeds, 3]
        refused += int(np.isnan(fits[:, 0]).sum())
        for i, (name, true) in enumerate(truth.items()):
            e = seed_interval(fits[:, i], log=name != "A")
            if not np.isfinite(e.low):
                no_interval += name == "A"
                continue
            hits[name].append(bool(e.low <= true <= e.high))
    out = {f"{k} coverage": float(np.mean(v)) if v else float("nan") for k, v in hits.items()}
    out["MC error"] = float(np.sqrt(0.95 * 0.05 / max(len(hits["A"]), 1)))
    out["refused fits"] = refused / (studies * seeds)
    out["no interval"] = no_interval / studies
    return out


#: the rows of the README's table: the default, and a study whose seeds barely differ (the fit's
#: own error dominates the interval)
SCENARIOS = {
    "seed spread of ScaleRL's runs (A ± 0.015)": CurveModel(),
    "fit error dominates (A ± 0.005)": CurveModel(a_sd=0.005, log_sd=0.05),
}


def main(studies: int = 400, seed_counts: tuple[int, ...] = (3, 5)) -> None:
    print(f"{studies} studies per row; truth A 0.85, B 1.2, C_mid 1.5M, R0 0.52, 1024 eval samples")
    columns = ["scenario", "seeds", "A", "B", "C_mid", "MC error", "refused fits"]
    print("| " + " | ".join(columns) + " |  (coverage of the 95% intervals)")
    print("|---|---|---|---|---|---|---|")
    for name, model in SCENARIOS.items():
        for n in seed_counts:
            c = coverage(model, n, studies)
            print(
                f"| {name} | {n} | {c['A coverage']:.3f} | {c['B coverage']:.3f} | "
                f"{c['C_mid coverage']:.3f} | {c['MC error']:.3f} | {c['refused fits']:.3f} |"
            )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
