"""Group-sequential designs: look at the data after looks[0] < looks[1] < … seeds, stop each
contrast as soon as it is decided, and keep the family-wise error of the whole procedure at alpha.

Why: testing again at 0.05 each time seeds are added (optional stopping) inflates the false-positive
rate; a fixed design at the largest seed count wastes seeds on contrasts that are clear early.

- Information (`stats.information`): look k's fraction t_k = Var̂(Δ̂_K)/Var̂(Δ̂_k) from its own
  crossed components (σ²_seed at its upper 90% bound), not the seed count: with an arm ×
  problem interaction the problem term does not shrink with seeds, so an early look knows more
  than n_k/n_K of the final answer.
- Boundaries (`stats.spending`): Lan–DeMets at the fractions look k observed (the earlier looks'
  from the same components), recomputed at every look (Jennison & Turnbull 2000, ch. 7). A
  look whose remaining seeds would lower the SE by less than `information.SEED_GAIN` is the
  contrast's final analysis (fractions rescaled to end at 1: all its remaining alpha), and the
  runner recommends more problems or samples instead of seeds.
- The test at look k is the task-level t of `crossed.crossed` at the nominal level 2·(1 −
  Φ(z_k)), on `crossed.look_df` degrees of freedom: the bounded Satterthwaite df with the seed
  mean square at its upper `df_level(nominal)` bound, a level that shrinks with the nominal one
  (at 0.001 the seed term's chance lows matter at their own rate); checked on exact mean-square
  draws at 0.001–0.05 and by `devtools.calibration.sequential_task` on whole studies.
- Equivalence stops a contrast when its interval at confidence 1 − 2·a_k lies inside ±margin,
  a_k the one-sided nominal level of the same spending at total one-sided EQUIVALENCE_ALPHA:
  each one-sided test of TOST is then a one-sided group-sequential test. Stopping for
  equivalence only removes chances to reject later and vice versa (non-binding).
- Several contrasts: Bonferroni, each contrast's sequential test at alpha / m (m = contrasts in
  the primary family). Valid under any dependence (contrasts share the reference arm).
- The old rule (t_k = n_k/n_K, df capped at n − 1) stays as `rule=SEEDS` for the calibration's
  side-by-side table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from ablate.report.stats import information as info
from ablate.report.stats.crossed import DF_BOUND, EQUIVALENCE_CONFIDENCE, crossed, look_df
from ablate.report.stats.inference import MIN_SEEDS
from ablate.report.stats.spending import SPENDING as SPENDING  # re-exported: the design's
from ablate.report.stats.spending import boundaries
from ablate.report.stats.spending import crossing_probabilities as crossing_probabilities
from ablate.report.stats.spending import spent as spent

EQUIVALENCE_ALPHA = (1 - EQUIVALENCE_CONFIDENCE) / 2  # one-sided, total over the looks: 0.05
DIFFERENT, EQUIVALENT, INCONCLUSIVE, CONTINUE = (
    "different",
    "equivalent",
    "inconclusive",
    "continue",
)
INFORMATION, SEEDS = "information", "seeds"  # how a look measures what it knows


def seed_fractions(looks: Sequence[int]) -> np.ndarray:
    """t_k = looks[k] / looks[-1]: the old rule's information (the seed count)."""
    looks = np.asarray(looks, dtype=float)
    return looks / looks[-1]


def nominal_levels(looks: Sequence[int], alpha: float, kind: str) -> np.ndarray:
    """Two-sided nominal levels per look at the seed fractions [K] (the old rule)."""
    return 2 * sps.norm.sf(boundaries(seed_fractions(looks), alpha, kind))


def equivalence_levels(looks: Sequence[int], kind: str, alpha: float = EQUIVALENCE_ALPHA):
    """One-sided TOST levels a_k per look at the seed fractions [K] (the old rule)."""
    return sps.norm.sf(boundaries(seed_fractions(looks), alpha, kind, sides=1))


@functools.lru_cache(maxsize=8192)
def look_levels(
    looks: tuple[int, ...], k: int, t: float, final: bool, alpha: float, kind: str
) -> tuple[float, float]:
    """(two-sided nominal level, one-sided TOST level) of look k (0-based) whose information
    fraction is t, the earlier looks' fractions from the same components
    (`information.look_fractions`); `final`: the look spends all the remaining alpha."""
    fractions = info.look_fractions(looks, k, t, final)
    z = boundaries(fractions, alpha, kind)[-1]
    z_eq = boundaries(fractions, EQUIVALENCE_ALPHA, kind, sides=1)[-1]
    return float(2 * sps.norm.sf(z)), float(sps.norm.sf(z_eq))


def df_level(nominal: np.ndarray) -> np.ndarray:
    """The level of the seed mean square's upper bound in a look's df (`crossed.look_df`): the
    look's own nominal level, at most DF_BOUND."""
    return np.minimum(DF_BOUND, np.asarray(nominal, dtype=float))[()]


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
    fraction: np.ndarray  # information fraction t_k
    final: np.ndarray  # the contrast's last analysis (last look, or seeds cannot help)
    nominal: np.ndarray
    equivalence_level: np.ndarray
    problem_share: np.ndarray  # σ²_problem/J's share of Var(Δ̂) at this look


def _levels(c, looks, k: int, alpha: float, kind: str, rule: str):
    """(t, final, nominal, TOST level) of look k, arrays over the looks' leading axes."""
    shape, last = np.shape(c.mean), k == len(looks) - 1
    if rule == SEEDS:
        t = np.full(shape, looks[k] / looks[-1])
        nominal = np.full(shape, nominal_levels(looks, alpha, kind)[k])
        eq = np.full(shape, equivalence_levels(looks, kind)[k])
        return t, np.full(shape, last), nominal, eq
    t = np.broadcast_to(info.fraction(info.ratio(c, DF_BOUND), looks[k], looks[-1]), shape)
    final = np.asarray(last | info.seeds_cannot_help(t))
    keys = np.stack([t.ravel(), final.ravel()], axis=1)
    unique, index = np.unique(keys, axis=0, return_inverse=True)
    design = (tuple(int(n) for n in looks), k)
    got = np.array([look_levels(*design, float(u), bool(f), float(alpha), kind) for u, f in unique])
    nominal, eq = (got[np.ravel(index), i].reshape(shape) for i in (0, 1))
    return t, final, nominal, eq


def look_decisions(
    d: np.ndarray,
    looks: Sequence[int],
    k: int,
    alpha: float,
    margin: float | None,
    kind: str,
    rule: str = INFORMATION,
    levels: tuple[np.ndarray, np.ndarray] | None = None,
) -> LookDecisions:
    """Decisions of look k (0-based) on the differences d[..., n, J] (the seeds of that look);
    `levels` = (nominal [K], TOST [K]) overrides the spending (the calibration's naive tests)."""
    c = crossed(d)
    t, final, nominal, eq = _levels(c, looks, k, alpha, kind, rule)
    if levels is not None:
        nominal, eq = np.full(np.shape(t), levels[0][k]), np.full(np.shape(t), levels[1][k])
    df = np.minimum(c.df, max(c.n - 1, 1)) if rule == SEEDS else look_df(c, df_level(nominal))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(np.isfinite(c.p_value()), 2 * sps.t.sf(np.abs(c.mean) / c.se, df), np.nan)
        half = sps.t.isf(nominal / 2, df) * c.se
        eq_half = sps.t.isf(eq, df) * c.se
        different = p < nominal
        if margin is None or not margin > 0:
            equivalent = np.zeros(np.shape(c.mean), dtype=bool)
        else:
            equivalent = np.isfinite(p) & (c.mean - eq_half > -margin) & (c.mean + eq_half < margin)
    nan = ~np.isfinite(p)
    low, high = np.where(nan, np.nan, c.mean - half), np.where(nan, np.nan, c.mean + half)
    share = info.problem_share(c, looks[k])
    return LookDecisions(
        c.mean, low[()], high[()], p[()], different, equivalent[()], df, t[()], final[()],
        nominal[()], eq[()], share,
    )  # fmt: skip


def stopping_looks(
    d: np.ndarray,
    looks: Sequence[int],
    alpha: float,
    margin: float | None,
    kind: str,
    levels: tuple[np.ndarray, np.ndarray] | None = None,
    rule: str = INFORMATION,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised replay for simulation: d[..., looks[-1], J] -> (stop look index [...], −1 when
    never decided; verdict code [...]: 1 different, 2 equivalent, 3 inconclusive because seeds
    cannot help (stopped early), 0 inconclusive at the last look). "Different" wins when both
    hold at the same look (a small, real difference)."""
    shape = np.shape(d)[:-2]
    stop, verdict = np.full(shape, -1), np.zeros(shape, dtype=int)
    for k, n_k in enumerate(looks):
        look = look_decisions(d[..., :n_k, :], looks, k, alpha, margin, kind, rule, levels)
        early = look.final & (k < len(looks) - 1)
        code = np.where(look.different, 1, np.where(look.equivalent, 2, np.where(early, 3, 0)))
        newly = (stop < 0) & (code > 0)
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
    verdict: str  # different | equivalent | continue | inconclusive (after its final look)
    information: float = float("nan")  # t_k
    problem_share: float = float("nan")  # σ²_problem/J's share of Var(Δ̂)
    seeds_cannot_help: bool = False  # final before the last look: seeds would add too little


@dataclass(frozen=True)
class SequentialResult:
    """A contrast's look history, up to the look it stopped at (or the last look reached)."""

    name: str
    history: tuple[Look, ...]
    alpha: float  # this contrast's two-sided alpha (the family's alpha / m)
    margin: float | None
    max_seeds: int = 0  # looks[-1]

    @property
    def final(self) -> Look | None:
        return self.history[-1] if self.history else None

    @property
    def verdict(self) -> str:
        return self.final.verdict if self.final else CONTINUE

    @property
    def decided(self) -> bool:
        return self.verdict != CONTINUE


def _verdict(look: LookDecisions) -> str:
    if look.different:
        return DIFFERENT
    if look.equivalent:
        return EQUIVALENT
    return INCONCLUSIVE if look.final else CONTINUE


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
    look where it is different or equivalent, or where seeds cannot help; after its final look
    it is inconclusive."""
    d = np.asarray(d, dtype=float)
    ranks = np.arange(d.shape[0]) if ranks is None else np.asarray(ranks)
    reached = len(looks) if reached is None else min(reached, len(looks))
    history: list[Look] = []
    for k in range(reached):
        rows = d[ranks < looks[k]]
        seeds = rows.shape[0]
        if seeds < MIN_SEEDS or rows.shape[1] == 0:  # failed trials: no test yet
            rows = np.full((MIN_SEEDS - 1, 1), np.nan)
        look = look_decisions(rows, looks, k, alpha, margin, spending)
        verdict = _verdict(look)
        stats = (look.mean, look.low, look.high, look.p_value, look.nominal)
        where = (k + 1, seeds, int(looks[k]), *map(float, stats), float(look.equivalence_level))
        early = bool(look.final) and k < len(looks) - 1
        extra = (float(look.fraction), float(look.problem_share), early)
        history.append(Look(*where, verdict, *extra))
        if verdict != CONTINUE:
            break
    return SequentialResult(name, tuple(history), alpha, margin, int(looks[-1]))


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
    """One line per contrast: its latest look, verdict and Δ with its repeated interval; for a
    contrast seeds cannot help, the advice (more problems or samples) on the same line."""
    look = result.final
    if look is None:
        return f"{result.name}: no look yet"
    interval = f"[{_number(look.low)}, {_number(look.high)}]"
    line = (
        f"{result.name}: look {look.look} ({look.seeds} seeds): {look.verdict}, "
        f"Δ {_number(look.estimate)} {interval}, p {look.p_value:.3g} vs {look.nominal:.3g}"
    )
    if look.seeds_cannot_help and look.verdict == INCONCLUSIVE:
        remaining = max(result.max_seeds - look.planned, 0)
        advice = info.advice("", look.information, look.problem_share, remaining)
        line += ";" + advice.removeprefix(":")
    return line


def render_history(results: Sequence[SequentialResult]) -> str:
    """The look history as a markdown table (every look of every contrast)."""
    head = [
        "| contrast | look | seeds | information | Δ | repeated CI | p | nominal level | "
        "TOST level | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for r in results:
        for look in r.history:
            interval = f"[{_number(look.low)}, {_number(look.high)}]"
            levels = (f"{look.nominal:.3g}", f"{1 - 2 * look.equivalence_level:.4f}")
            where = (r.name, str(look.look), f"{look.seeds} of {look.planned}")
            where += (f"{look.information:.2f}",)
            cells = (*where, _number(look.estimate), interval, f"{look.p_value:.3g}", *levels)
            rows.append("| " + " | ".join((*cells, look.verdict)) + " |")
    return "\n".join(head + rows) + "\n"
