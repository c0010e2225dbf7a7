"""Is a plateau seen within the observed compute? The evidence the arm's A needs besides its fit.

A sigmoid fitted to a curve that is still straight in log compute puts A just above the last
point and the midpoint inside the compute, with a tight interval: the fit's rules (`pooled`:
A under 1, the midpoint 3× inside, B in range) are met by the shape the model assumes, not by
the data (simulated lines in log compute: an A shown in 52-59% of arms by those rules alone,
every one wrong). So A is shown only where the seeds' curves have flattened, judged without the
sigmoid: each seed's slope per decade (least squares of pass@1 on log10 compute,
`reach.slope_per_decade`) over the last third of the observed log compute minus its slope over
the two thirds before it, tested over seeds (one-sided paired t at ALPHA: the last third
shallower).

A seed's change of slope is a fixed linear function of its evals (stretches fixed by the
compute, not by the values): zero in expectation on any line in log compute, whatever each
seed's slope, and positive on a convex (steepening) curve; the seeds are independent. So under
"straight or steepening" the test's level is at most ALPHA whatever the autocorrelation of a
trajectory's residuals, exact for Gaussian noise. A sign-flip test cannot reach 0.05 below 5
seeds (its smallest p is 2^-n), so the t is used at every n ≥ MIN_SEEDS.

Chosen over (simulated, `python -m devtools curve-calibration`):
- the last third against the middle third: a curve that levelled early is flat in both, so a
  curve that rose before its first evals and then stayed flat for a decade and a half showed
  its plateau in 7-26% of arms (against 67-100% here);
- adding "or the last fifth against the fifth before it" (a curve still bending at the end,
  each test at ALPHA / 2): it shows A on a sigmoid seen to 4× its midpoint (84% of its gain) in
  6-39% of arms, but the arms whose noise bent them early carry a low A (its interval covered
  0.83-0.92 over those at 3 and 5 seeds), and it costs a third of the power on levelled curves;
- a seed-jackknife interval of the share of the gain still to come, (A − R_last) / (A − R0):
  it is the sigmoid's own extrapolation, small where the fit puts A just above the last point;
  on lines in log compute its upper end was below 1/2 in 40-80% of the arms the fit rules
  passed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ablate.report.curves.reach import slope_per_decade
from ablate.report.stats import inference

SHARE, BEFORE = 1 / 3, 2 / 3  # the last third of the log compute against the two thirds before
MIN_WINDOW_POINTS = 3  # evals in a stretch for its slope
NO_PLATEAU = "no plateau seen within the observed compute"


def stretches(
    first: float, last: float, share: float, before: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The compute bounds ((low, high] before, (low, high] last) of the last `share` of
    [log first, log last] and of the `before` share preceding it (the earlier one closed at
    `first`)."""
    lo, hi = np.log10(first), np.log10(last)
    cut, start = hi - share * (hi - lo), hi - (share + before) * (hi - lo)
    tiny = 1e-9 * (hi - lo)  # a stretch that starts at `first` includes it
    return (10 ** (start - tiny), 10**cut), (10**cut, 10**hi)


def slope_change(
    c: np.ndarray, r: np.ndarray, first: float, last: float, share: float, before: float
) -> float:
    """One seed's slope per decade over the last stretch minus over the one before it (points
    c [n], pass@1 r [n]); NaN when a stretch holds fewer than MIN_WINDOW_POINTS evals."""
    c, r = np.asarray(c, dtype=float), np.asarray(r, dtype=float)
    slopes = []
    for low, high in stretches(first, last, share, before):
        inside = (c > low) & (c <= high * (1 + 1e-12))
        if inside.sum() < MIN_WINDOW_POINTS:
            return float("nan")
        slopes.append(slope_per_decade(c[inside], r[inside]))
    return slopes[1] - slopes[0]


def shallower_p(changes: np.ndarray) -> float:
    """One-sided paired t p-value that the mean change of slope [seeds] is below 0; NaN below
    MIN_SEEDS or with a NaN change; identical changes (no spread): 0 if negative, else 1."""
    d = np.asarray(changes, dtype=float)
    n = len(d)
    if n < inference.MIN_SEEDS or not np.all(np.isfinite(d)):
        return float("nan")
    sd = float(d.std(ddof=1))
    if sd <= inference.ZERO_VARIANCE_RTOL * max(float(np.abs(d).max()), 1e-300):
        return 0.0 if d.mean() < 0 else 1.0
    return float(sps.t.cdf(d.mean() / (sd / np.sqrt(n)), n - 1))


@dataclass(frozen=True)
class Curvature:
    """The seeds' change of slope per decade, last third minus the two thirds before it (mean
    [95% t interval]), its one-sided p, and whether a plateau is suggested (p < ALPHA)."""

    change: inference.Estimate
    p: float

    @property
    def seen(self) -> bool:
        return bool(self.p < inference.ALPHA)

    def reason(self) -> str:
        """Why no plateau is suggested (empty when one is)."""
        if self.seen:
            return ""
        n, need = self.change.n, inference.MIN_SEEDS
        if n < need:
            return f"{NO_PLATEAU}: a bend is judged over seeds, and there are {n} (needs {need})"
        if not np.isfinite(self.p):
            return (
                f"{NO_PLATEAU}: the last third of the log compute or the two thirds before it "
                f"holds fewer than {MIN_WINDOW_POINTS} evals"
            )
        return (
            f"{NO_PLATEAU}: the slope per decade over the last third of the log compute is not "
            f"below the two thirds before it (change {self.change.value:+.3f} per decade, "
            f"one-sided p = {self.p:.2g})"
        )


def curvature(curves: Sequence[tuple[np.ndarray, np.ndarray]], first: float, last: float):
    """The arm's evidence of a plateau from its seeds' points [(c, r)] over the compute every
    seed was observed on, (first, last]."""
    d = np.array([slope_change(c, r, first, last, SHARE, BEFORE) for c, r in curves])
    if np.all(np.isfinite(d)):
        change = inference.t_interval(d)
    else:
        change = inference.Estimate(float("nan"), float("nan"), float("nan"), len(d))
    return Curvature(change, shallower_p(d))
