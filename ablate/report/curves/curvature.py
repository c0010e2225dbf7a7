"""Is a plateau seen within the observed compute? The evidence the arm's A needs besides its fit.

A sigmoid fitted to a curve that is still straight in log compute puts A just above the last
point and the midpoint inside the compute, with a tight interval: the fit's rules (`pooled`:
A under 1, the midpoint 3× inside, B in range) are met by the shape the model assumes, not by
the data (on simulated lines in log compute: a confident A in ~90% of arms). So A is shown
only where the seeds' curves bend, judged without the sigmoid: each seed's slope per decade
(least squares of pass@1 on log10 compute, `reach.slope_per_decade`) over a last stretch of
the observed log compute against the stretch before it,

- **levelled**: the last third against the two thirds before it (a curve that rose, then stays
  flat: an early rise, a plateau before a later second rise);
- **bending**: the last fifth against the fifth before it (a curve that is still rising but
  more slowly at the end: a sigmoid seen just past its midpoint, whose slope per decade falls
  from its peak in the last fifths; on the thirds the still-steepening middle hides it).

Each change of slope is tested over seeds (one-sided paired t: the last stretch shallower),
at ALPHA / 2 each (Bonferroni over the two), and a plateau is suggested where either is
significant. A seed's change of slope is a fixed linear function of its evals (windows fixed
by the compute, not by the values), zero in expectation for any line in log compute (whatever
each seed's slope) and positive for a convex curve; the seeds are independent; so under
"straight or steepening" the test's level is at most ALPHA, whatever the autocorrelation of a
trajectory's residuals, and exact for Gaussian noise. A sign-flip test cannot reach 0.025 below
6 seeds (its smallest p is 2^-n), so the t is used at every n ≥ MIN_SEEDS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ablate.report.curves.reach import slope_per_decade
from ablate.report.stats import inference

#: (name, share of the log compute the last stretch spans, share the stretch before it spans)
TESTS = (("levelled", 1 / 3, 2 / 3), ("bending", 1 / 5, 1 / 5))
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
    """The two changes of slope over seeds (mean [95% t], one-sided p) and whether a plateau is
    suggested within the observed compute (either p < ALPHA / 2)."""

    changes: dict[str, inference.Estimate]
    p: dict[str, float]

    @property
    def seen(self) -> bool:
        return any(p < inference.ALPHA / len(TESTS) for p in self.p.values())

    def reason(self) -> str:
        """Why no plateau is suggested (empty when one is)."""
        if self.seen:
            return ""
        n = max((e.n for e in self.changes.values()), default=0)
        if n < inference.MIN_SEEDS:
            need = inference.MIN_SEEDS
            return f"{NO_PLATEAU}: a bend is judged over seeds, and there are {n} (needs {need})"
        said = []
        for name, share, before in TESTS:
            last, prior, p = _share_words(share), _share_words(before), self.p[name]
            if not np.isfinite(p):
                said.append(f"the last {last} or the {prior} before it has too few evals")
                continue
            said.append(
                f"the slope per decade over the last {last} is not below the {prior} before "
                f"it (change {self.changes[name].value:+.3f}, one-sided p = {p:.2g})"
            )
        return f"{NO_PLATEAU}: " + "; ".join(said)


def _share_words(share: float) -> str:
    return {1 / 3: "third", 2 / 3: "two thirds", 1 / 5: "fifth"}.get(share, f"{share:.2g}")


def curvature(curves: Sequence[tuple[np.ndarray, np.ndarray]], first: float, last: float):
    """The arm's evidence of a plateau from its seeds' points [(c, r)] over the compute every
    seed was observed on, (first, last]."""
    changes, p = {}, {}
    for name, share, before in TESTS:
        d = np.array([slope_change(c, r, first, last, share, before) for c, r in curves])
        ok = d[np.isfinite(d)]
        changes[name] = inference.t_interval(ok) if len(ok) == len(d) else _none(len(d))
        p[name] = shallower_p(d)
    return Curvature(changes, p)


def _none(n: int) -> inference.Estimate:
    nan = float("nan")
    return inference.Estimate(nan, nan, nan, n)
