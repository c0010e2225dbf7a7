"""Group-sequential designs: look at the data after looks[0] < looks[1] < … seeds, stop each
contrast as soon as it is decided, and keep the family-wise error of the whole procedure at alpha.

Why: testing again at 0.05 each time seeds are added (optional stopping) inflates the false-positive
rate; a fixed design at the largest seed count wastes seeds on contrasts that are clear early.

- Spending (Lan & DeMets 1983): alpha(t) is the type-I error spent by information fraction
  t = looks[k] / looks[-1]. O'Brien–Fleming-like 2 − 2Φ(z_{1−α/2}/√t) spends almost nothing early;
  Pocock-like α·ln(1 + (e − 1)t) spends evenly.
- Boundaries: z_k such that P_0(cross first at look k) = alpha(t_k) − alpha(t_{k−1}) under the
  canonical joint distribution (Z_k = S(t_k)/√t_k, S a Brownian motion), by exact recursive
  numerical integration on a grid (Armitage, McPherson & Rowe 1969): deterministic, no Monte Carlo.
- The test at look k is the task-level t test of `crossed.crossed` (seeds × problems) at the
  nominal level 2·(1 − Φ(z_k)); the df are few, so the calibration (`devtools.calibration.
  sequential`) checks the family-wise error by simulation.
- Equivalence stops a contrast when its interval at confidence 1 − 2·a_k lies inside ±margin,
  a_k the one-sided nominal level of the same spending at total one-sided EQUIVALENCE_ALPHA: each
  one-sided test of TOST is then a one-sided group-sequential test, so P(equivalent at any look |
  Δ = ±margin) <= EQUIVALENCE_ALPHA. Stopping for equivalence only removes chances to reject
  later and vice versa (non-binding), so neither error rate grows.
- Several contrasts: Bonferroni, each contrast's sequential test at alpha / m (m = contrasts in
  the primary family). Valid under any dependence (contrasts share the reference arm) and simple;
  Holm-type sequential procedures would be less conservative.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize
from scipy import stats as sps

from ablate.report.stats.crossed import EQUIVALENCE_CONFIDENCE, crossed
from ablate.report.stats.inference import MIN_SEEDS

SPENDING = ("obrien_fleming", "pocock")
EQUIVALENCE_ALPHA = (1 - EQUIVALENCE_CONFIDENCE) / 2  # one-sided, total over the looks: 0.05
DIFFERENT, EQUIVALENT, INCONCLUSIVE, CONTINUE = (
    "different",
    "equivalent",
    "inconclusive",
    "continue",
)
_STEP = 0.01  # grid spacing of the integration, z scale
_FAR = 10.0  # |z| beyond which the null density is negligible (one-sided lower end)


def spent(t: np.ndarray | float, alpha: float, kind: str) -> np.ndarray:
    """Type-I error spent by information fraction t (0 at t = 0, alpha at t = 1)."""
    t = np.clip(np.asarray(t, dtype=float), 0.0, 1.0)
    if kind == "obrien_fleming":
        with np.errstate(divide="ignore"):
            return (2 * sps.norm.sf(sps.norm.isf(alpha / 2) / np.sqrt(t)))[()]
    if kind == "pocock":
        return (alpha * np.log1p((np.e - 1) * t))[()]
    raise ValueError(f"spending must be one of {SPENDING}; got {kind!r}")


def information_fractions(looks: Sequence[int]) -> np.ndarray:
    """t_k = looks[k] / looks[-1]: the seed count is the information (same problems per seed)."""
    looks = np.asarray(looks, dtype=float)
    return looks / looks[-1]


def _grid(low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """Simpson nodes and weights on [low, high] (an odd number of nodes)."""
    count = 2 * max(int(np.ceil((high - low) / (2 * _STEP))), 1) + 1
    z = np.linspace(low, high, count)
    w = np.ones(count)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return z, w * (z[1] - z[0]) / 3


def _exit(density, z, w, mean_scale, sd, bound, sides) -> float:
    """P(continue so far and |Z_next| >= bound (Z_next >= bound one-sided))."""
    mu = z * mean_scale  # [G]: E[Z_next | Z = z]
    tail = sps.norm.sf((bound - mu) / sd)
    if sides == 2:
        tail = tail + sps.norm.cdf((-bound - mu) / sd)
    return float(np.sum(w * density * tail))


def _continue(density, z, w, mean_scale, sd, bound, sides):
    """The sub-density of Z_next on its continuation region, on a new grid."""
    high = min(bound, _FAR)
    z_next, w_next = _grid(-high if sides == 2 else -_FAR, high)
    kernel = sps.norm.pdf((z_next[:, None] - z[None, :] * mean_scale) / sd) / sd  # [G', G]
    return kernel @ (w * density), z_next, w_next


def _solve(exit_at, target: float) -> float:
    if not target > 0:
        return float("inf")
    return float(optimize.brentq(lambda c: exit_at(c) - target, 0.0, 40.0, xtol=1e-10))


def boundaries(fractions: Sequence[float], alpha: float, kind: str, sides: int = 2) -> np.ndarray:
    """Critical |z| per look (z one-sided) so that the look-k first-crossing probability under the
    null is spent(t_k) − spent(t_{k−1}): fractions [K] increasing in (0, 1] -> z [K]."""
    key = tuple(float(f) for f in fractions)
    return np.array(_boundaries(key, float(alpha), kind, sides))


@functools.lru_cache(maxsize=256)
def _boundaries(fractions: tuple[float, ...], alpha: float, kind: str, sides: int) -> tuple:
    """Cached: a replay asks for the same design's boundaries once per contrast and look."""
    t = np.asarray(fractions, dtype=float)
    increments = np.diff(spent(t, alpha, kind), prepend=0.0)
    return tuple(_walk(t, sides, lambda k, exit_at: _solve(exit_at, increments[k])))


def crossing_probabilities(fractions: Sequence[float], bounds: Sequence[float], sides: int = 2):
    """P_0(cross first at look k) for given boundaries: [K] (sums to the design's alpha)."""
    t, bounds = np.asarray(fractions, dtype=float), np.asarray(bounds, dtype=float)
    out: list[float] = []

    def record(k: int, exit_at) -> float:
        out.append(exit_at(bounds[k]))
        return float(bounds[k])

    _walk(t, sides, record)
    return np.array(out)


def _walk(t: np.ndarray, sides: int, choose) -> np.ndarray:
    """Look by look: `choose(k, exit_at)` picks look k's boundary given the function boundary ->
    first-crossing probability at look k; the continuation density is carried to the next look."""
    z, w, density = np.zeros(1), np.ones(1), np.ones(1)  # before look 1: Z = 0 surely
    out = []
    for k in range(len(t)):
        scale = np.sqrt(t[k - 1] / t[k]) if k else 0.0  # Z_k | Z_{k-1} = z ~ N(z·scale, sd²)
        sd = np.sqrt((t[k] - t[k - 1]) / t[k]) if k else 1.0

        def exit_at(c, d=density, z=z, w=w, s=scale, v=sd):
            return _exit(d, z, w, s, v, c, sides)

        out.append(choose(k, exit_at))
        if k + 1 < len(t):
            density, z, w = _continue(density, z, w, scale, sd, out[-1], sides)
    return np.array(out)


def nominal_levels(looks: Sequence[int], alpha: float, kind: str) -> np.ndarray:
    """Two-sided nominal p-value thresholds per look: 2·(1 − Φ(z_k)) [K]."""
    return 2 * sps.norm.sf(boundaries(information_fractions(looks), alpha, kind))


def equivalence_levels(looks: Sequence[int], kind: str, alpha: float = EQUIVALENCE_ALPHA):
    """One-sided nominal levels a_k per look for each one-sided test of TOST [K]: equivalence at
    look k is the (1 − 2·a_k) interval inside ±margin."""
    return sps.norm.sf(boundaries(information_fractions(looks), alpha, kind, sides=1))


@dataclass(frozen=True)
class LookDecisions:
    """One look's statistics and decisions, arrays over the leading axes of d[..., n, J]."""

    mean: np.ndarray
    low: np.ndarray  # repeated confidence interval at 1 − nominal: excludes 0 iff different
    high: np.ndarray
    p_value: np.ndarray
    different: np.ndarray  # p < nominal
    equivalent: np.ndarray  # the (1 − 2·a_k) interval inside ±margin
    df: np.ndarray


def look_decisions(
    d: np.ndarray, nominal: float, equivalence_level: float, margin: float | None
) -> LookDecisions:
    """Decisions of one look on the differences d[..., n, J] (the seeds of that look).

    The looks test at small nominal levels (0.001–0.01), where the crossed t at its Satterthwaite
    df is liberal when the arm × problem term is a fair share of the variance (measured on
    `devtools.calibration.sequential`'s model: 0.0067 rejections at a nominal 0.0054, and a
    Pocock family-wise error of 0.062); so a look reads its t at no more than the seeds' n − 1
    df, which brings both back under their levels (conservative at the first looks)."""
    c = crossed(d)
    df = np.minimum(c.df, max(c.n - 1, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(np.isfinite(c.p_value()), 2 * sps.t.sf(np.abs(c.mean) / c.se, df), np.nan)
        half = sps.t.isf(nominal / 2, df) * c.se
        eq_half = sps.t.isf(equivalence_level, df) * c.se
        different = p < nominal
        if margin is None or not margin > 0:
            equivalent = np.zeros(np.shape(c.mean), dtype=bool)
        else:
            equivalent = np.isfinite(p) & (c.mean - eq_half > -margin) & (c.mean + eq_half < margin)
    nan = ~np.isfinite(p)
    low, high = np.where(nan, np.nan, c.mean - half), np.where(nan, np.nan, c.mean + half)
    return LookDecisions(c.mean, low[()], high[()], p[()], different, equivalent[()], df)


def stopping_looks(
    d: np.ndarray,
    looks: Sequence[int],
    alpha: float,
    margin: float | None,
    kind: str,
    levels: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised replay for simulation: d[..., looks[-1], J] -> (stop look index [...], −1 when
    never decided; verdict code [...]: 1 different, 2 equivalent, 0 inconclusive). "Different"
    wins when both hold at the same look (a small, real difference). `levels` = (nominal [K],
    equivalence [K]) overrides the spending (the calibration's naive repeated tests)."""
    if levels is None:
        levels = nominal_levels(looks, alpha, kind), equivalence_levels(looks, kind)
    nominal, eq = levels
    shape = np.shape(d)[:-2]
    stop, verdict = np.full(shape, -1), np.zeros(shape, dtype=int)
    for k, n_k in enumerate(looks):
        look = look_decisions(d[..., :n_k, :], nominal[k], eq[k], margin)
        open_ = stop < 0
        code = np.where(look.different, 1, np.where(look.equivalent, 2, 0))
        newly = open_ & (code > 0)
        stop, verdict = np.where(newly, k, stop), np.where(newly, code, verdict)
    return stop, verdict


@dataclass(frozen=True)
class Look:
    """One contrast at one look."""

    look: int  # 1-based
    seeds: int  # seeds with data among the first `planned` of the study
    planned: int  # looks[k]
    estimate: float
    low: float  # repeated confidence interval at 1 − nominal
    high: float
    p_value: float
    nominal: float  # two-sided nominal level of the difference test at this look
    equivalence_level: float  # one-sided a_k: TOST at the 1 − 2·a_k interval
    verdict: str  # different | equivalent | continue | inconclusive (after the last look)


@dataclass(frozen=True)
class SequentialResult:
    """A contrast's look history, up to the look it stopped at (or the last look reached)."""

    name: str
    history: tuple[Look, ...]
    alpha: float  # this contrast's two-sided alpha (the family's alpha / m)
    margin: float | None

    @property
    def final(self) -> Look | None:
        return self.history[-1] if self.history else None

    @property
    def verdict(self) -> str:
        return self.final.verdict if self.final else CONTINUE

    @property
    def decided(self) -> bool:
        return self.verdict != CONTINUE


def replay_contrast(
    d: np.ndarray,
    looks: Sequence[int],
    alpha: float,
    margin: float | None,
    spending: str,
    *,
    ranks: Sequence[int] | None = None,
    reached: int | None = None,
    name: str = "",
) -> SequentialResult:
    """A contrast's look history rebuilt from its data (stateless): d[n, J] per-(seed, problem)
    differences arm − reference; `ranks[i]` is row i's seed's position in the study's seed order
    (default 0..n−1; a seed missing from d is a failed trial); look k uses the rows ranked below
    looks[k]; `reached` = looks whose seeds have been run (default all). It stops at the first
    look where it is different or equivalent; after the last look it is inconclusive."""
    d = np.asarray(d, dtype=float)
    ranks = np.arange(d.shape[0]) if ranks is None else np.asarray(ranks)
    nominal, eq = nominal_levels(looks, alpha, spending), equivalence_levels(looks, spending)
    reached = len(looks) if reached is None else min(reached, len(looks))
    history: list[Look] = []
    for k in range(reached):
        rows = d[ranks < looks[k]]
        seeds = rows.shape[0]
        if seeds < MIN_SEEDS or rows.shape[1] == 0:  # failed trials: no test yet
            rows = np.full((MIN_SEEDS - 1, 1), np.nan)
        look = look_decisions(rows, float(nominal[k]), float(eq[k]), margin)
        if look.different:
            verdict = DIFFERENT
        elif look.equivalent:
            verdict = EQUIVALENT
        else:
            verdict = INCONCLUSIVE if k == len(looks) - 1 else CONTINUE
        stats = map(float, (look.mean, look.low, look.high, look.p_value, nominal[k], eq[k]))
        history.append(Look(k + 1, seeds, int(looks[k]), *stats, verdict))
        if verdict != CONTINUE:
            break
    return SequentialResult(name, tuple(history), alpha, margin)


def replay(
    contrasts: dict[str, tuple[np.ndarray, Sequence[int], int]],
    looks: Sequence[int],
    alpha: float,
    margin: float | None,
    spending: str,
) -> list[SequentialResult]:
    """The primary family's contrasts, name -> (d[n, J], ranks, looks reached), each tested
    sequentially at alpha / m (Bonferroni over the m contrasts)."""
    per_contrast = alpha / max(len(contrasts), 1)
    return [
        replay_contrast(d, looks, per_contrast, margin, spending, ranks=r, reached=k, name=name)
        for name, (d, r, k) in contrasts.items()
    ]


def _number(x: float, digits: int = 3) -> str:
    return f"{x:+.{digits}f}" if np.isfinite(x) else "—"


def look_line(result: SequentialResult) -> str:
    """One line per contrast: its latest look, verdict and Δ with its repeated interval."""
    look = result.final
    if look is None:
        return f"{result.name}: no look yet"
    interval = f"[{_number(look.low)}, {_number(look.high)}]"
    return (
        f"{result.name}: look {look.look} ({look.seeds} seeds): {look.verdict}, "
        f"Δ {_number(look.estimate)} {interval}, p {look.p_value:.3g} vs {look.nominal:.3g}"
    )


def render_history(results: Sequence[SequentialResult]) -> str:
    """The look history as a markdown table (every look of every contrast)."""
    head = [
        "| contrast | look | seeds | Δ | repeated CI | p | nominal level | TOST level | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for r in results:
        for look in r.history:
            interval = f"[{_number(look.low)}, {_number(look.high)}]"
            levels = (f"{look.nominal:.3g}", f"{1 - 2 * look.equivalence_level:.4f}")
            where = (r.name, str(look.look), f"{look.seeds} of {look.planned}")
            cells = (*where, _number(look.estimate), interval, f"{look.p_value:.3g}", *levels)
            rows.append("| " + " | ".join((*cells, look.verdict)) + " |")
    return "\n".join(head + rows) + "\n"
