"""Does the report's inference keep its promises? Checked on simulated studies.

For each seed count n, studies simulated by `devtools.calibration.simulate` go through the very
statistics the report runs (`ablate.report.stats`): the 95% t interval of an arm's mean and of a
paired contrast must cover the truth 95% of the time; the marks (paired t of each arm against the
reference arm 0, Holm over the table's A − 1 contrasts, mark = Holm p < ALPHA) must fire on at
least one null arm in at most ALPHA of the studies (the family-wise error rate); and at the
minimum detectable effect that the power analysis gives for 80% power (Bonferroni α/(A − 1), a
conservative bound on Holm's first step), one arm with that effect must be marked in at least 80%
of the studies. Every rate carries its Monte-Carlo standard error (studies are the unit: rates over
several arms of a study are averaged within the study first).
"""

from __future__ import annotations

import textwrap
from dataclasses import replace

import numpy as np
import pandas as pd

from ablate.base.errors import ConfigError
from ablate.report.stats import inference as stats
from devtools.calibration.simulate import StudyModel, sigma_for_seed_sd, simulate

SEEDS = (3, 5, 10)
ARMS = (4, 8)
POWER = 0.8
SD_STUDIES, SD_SEEDS = 4000, 10  # the simulation that pins down the true SD of paired differences


def study_rate(hits: np.ndarray) -> tuple[float, float]:
    """Rate and its Monte-Carlo SE from hits [studies, ...] (bool, or NaN where undefined): each
    study's mean first, since the arms of one study are not independent."""
    per_study = np.asarray(hits, dtype=float).reshape(len(hits), -1).mean(axis=1)  # [studies]
    if np.isnan(per_study).all():
        return float("nan"), float("nan")
    return float(per_study.mean()), float(per_study.std(ddof=1) / np.sqrt(len(per_study)))


def _covered(low: np.ndarray, high: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """True/False where the interval is defined, NaN where the report gives none."""
    hit = ((low <= truth) & (truth <= high)).astype(float)
    return np.where(np.isnan(low) | np.isnan(high), np.nan, hit)


def arm_coverage(observed: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """Coverage of the t interval of each arm's mean: observed [S, A, n], truth [S, A]."""
    mean, sd = observed.mean(axis=-1), observed.std(axis=-1, ddof=1)
    half = stats.t_half_width(sd, observed.shape[-1])
    return study_rate(_covered(mean - half, mean + half, truth))


def contrast_coverage(observed: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """Coverage of the paired t interval of arm − arm 0: observed [S, A, n], truth [S, A]."""
    d = observed[:, 1:] - observed[:, :1]  # [S, A-1, n]
    mean, sd = d.mean(axis=-1), d.std(axis=-1, ddof=1)
    half = stats.t_half_width(sd, d.shape[-1])
    return study_rate(_covered(mean - half, mean + half, truth[:, 1:] - truth[:, :1]))


def marks(observed: np.ndarray, test: str = "paired t") -> np.ndarray:
    """The report's marks on arms 1.. against arm 0: observed [S, A, n] -> bool [S, A-1]."""
    test_p = {"paired t": stats.paired_t_p, "sign-flip": stats.sign_flip_p}[test]
    p = test_p(observed[:, 1:] - observed[:, :1])  # [S, A-1]
    return stats.holm(p) < stats.ALPHA  # NaN (too few seeds) is never a mark


def paired_sd(model: StudyModel, effect: float = 0.0, seed: int = 0) -> float:
    """True SD of the per-seed differences arm 1 − arm 0 when arm 1 has `effect`, from one large
    simulation: the root of the mean within-study variance, which is what a study's paired t
    sees (an effect moves an arm's operating point, and with it the SD)."""
    two = replace(model, arms=2, seeds=SD_SEEDS, effects=(0.0, effect))
    d = simulate(two, SD_STUDIES, [seed, 1]).observed  # [studies, 2, seeds]
    return float(np.sqrt((d[:, 1] - d[:, 0]).var(axis=1, ddof=1).mean()))


def _rate_columns(name: str, rate: tuple[float, float]) -> dict[str, float]:
    return {name: rate[0], f"{name}_se": rate[1]}


def _null_row(model: StudyModel, n: int, arms: tuple[int, ...], studies: int, seed: int) -> dict:
    """Coverage and FWER at n seeds from null studies with the largest arm count (the first A
    arms of such a study are a study with A arms)."""
    null = simulate(replace(model, arms=max(arms), seeds=n, effects=None), studies, [seed, n, 0])
    row = _rate_columns("arm_coverage", arm_coverage(null.observed, null.truth))
    row |= _rate_columns("contrast_coverage", contrast_coverage(null.observed, null.truth))
    for test, label in (("paired t", "fwer"), ("sign-flip", "signflip_fwer")):
        marked = marks(null.observed, test)  # Holm needs the whole family: re-run per arm count
        for a in arms:
            family = marked if a == max(arms) else marks(null.observed[:, :a], test)
            row |= _rate_columns(f"{label}_{a}arms", study_rate(family.any(axis=1)))
    return row


def _power_at(model: StudyModel, n: int, a: int, studies: int, sd: float, seed: int) -> dict:
    """At the power analysis's 80% MDE for a family of a − 1 contrasts: how often arm 1, the
    only arm with an effect, is marked. The MDE is solved at the true SD of the differences at
    that effect (one fixed-point step from the null SD `sd`), as a pilot of the real arms would
    measure it. An MDE that would push pass@1 out of (0, 1) leaves the power undefined."""
    alpha = stats.ALPHA / (a - 1)
    mde = stats.mde_paired(sd, n, alpha=alpha, power=POWER)
    if not np.isfinite(mde):
        return {f"mde_{a}arms": mde}
    toward_middle = 1.0 if model.base_pass <= 0.5 else -1.0  # keeps a large MDE inside (0, 1)
    try:
        sd_at = paired_sd(model, effect=toward_middle * mde, seed=seed)
        mde = stats.mde_paired(sd_at, n, alpha=alpha, power=POWER)
        effects = (0.0, toward_middle * mde) + (0.0,) * (a - 2)
        alt = simulate(replace(model, arms=a, seeds=n, effects=effects), studies, [seed, n, a])
    except ConfigError:  # the effect is beyond what pass@1 can show
        return {f"mde_{a}arms": float("nan")}
    row = {f"mde_{a}arms": mde, f"sd_{a}arms": sd_at}
    for test, label in (("paired t", "power"), ("sign-flip", "signflip_power")):
        row |= _rate_columns(f"{label}_{a}arms", study_rate(marks(alt.observed, test)[:, 0]))
    return row


def calibrate(
    model: StudyModel,
    seeds: tuple[int, ...] = SEEDS,
    arms: tuple[int, ...] = ARMS,
    studies: int = 2000,
    seed: int = 0,
    power: bool = True,
) -> pd.DataFrame:
    """One row per seed count (index `seeds`): rates with their `_se`, MDEs, and a note below
    MIN_SEEDS. `model`'s arms, seeds and effects are overridden per row."""
    sd = paired_sd(model, seed=seed) if power else float("nan")
    rows = []
    for n in seeds:
        row = {"seeds": n} | _null_row(model, n, tuple(arms), studies, seed)
        for a in arms if power else ():
            row |= _power_at(model, n, a, studies, sd, seed)
        row["note"] = "too few seeds: no interval or mark" if n < stats.MIN_SEEDS else ""
        rows.append(row)
    out = pd.DataFrame(rows).set_index("seeds")
    out.attrs |= {"paired_sd": sd, "studies": studies, "model": model}
    return out


def _cell(value: float, digits: int = 3) -> str:
    return "—" if not np.isfinite(value) else f"{value:.{digits}f}"


def _columns(arms: tuple[int, ...]) -> list[tuple[str, str]]:
    """(DataFrame column, table header) pairs, in table order."""
    cols = [("arm_coverage", "arm cov"), ("contrast_coverage", "contrast cov")]
    cols += [(f"fwer_{a}arms", f"FWER A={a}") for a in arms]
    cols += [(f"signflip_fwer_{a}arms", f"sign-flip FWER A={a}") for a in arms]
    for a in arms:
        cols += [(f"mde_{a}arms", f"MDE A={a}"), (f"power_{a}arms", f"power A={a}")]
    return cols


def format_table(table: pd.DataFrame, arms: tuple[int, ...] = ARMS) -> str:
    """The calibration table as markdown; MC error = the largest rate SE of the row."""
    cols = [(c, h) for c, h in _columns(tuple(arms)) if c in table.columns]
    header = ["n", *(h for _, h in cols), "MC error"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for n, row in table.iterrows():
        errors = [row[c] for c in table.columns if c.endswith("_se") and np.isfinite(row[c])]
        cells = [str(n), *(_cell(row[c]) for c, _ in cols), _cell(max(errors, default=np.nan))]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"n={n}: {row['note']}" for n, row in table.iterrows() if row["note"]]
    return "\n".join(lines + notes)


LEGEND = """\
Columns (rates over simulated studies; the target in brackets):
  n                  training seeds per arm
  arm cov            share of 95% t intervals of an arm's mean pass@1 holding its true mean [0.95]
  contrast cov       the same for the paired t interval of arm − reference [0.95]
  FWER A=a           share of null studies (a arms, no true differences) where any arm is marked:
                     paired t against arm 0, Holm over the a − 1 contrasts, Holm p < 0.05 [≤ 0.05]
  sign-flip FWER A=a the same with the exact sign-flip test in place of the paired t [≤ 0.05]
  MDE A=a            pass@1 difference the power analysis (paired t, α = 0.05/(a − 1), the true SD
                     of the per-seed differences) detects with 80% power
  power A=a          share of studies where one arm with that true difference is marked [≥ 0.80]
  MC error           the largest Monte-Carlo standard error of the row's rates"""


def describe(table: pd.DataFrame) -> str:
    """The legend and the simulated model of a `calibrate` table, as plain text."""
    m: StudyModel = table.attrs["model"]
    sigma = sigma_for_seed_sd(m.seed_sd, m.base_pass, m.problem_sd, m.problems)
    noise = "shared by the arms of a seed" if m.shared_eval_noise else "independent per run"
    model = (
        f"Model: {m.problems} problems × {m.samples} samples, logit difficulty ~ "
        f"N(logit {m.base_pass:g}, {m.problem_sd:g}²) per study; seed SD of a run's expected "
        f"pass@1 {m.seed_sd:g} (logit σ = {sigma:.3f}), a share ρ = {m.shared_fraction:g} of it "
        f"common to the arms of a seed; eval noise {noise}; null SD of paired per-seed "
        f"differences {table.attrs['paired_sd']:.4f}; {table.attrs['studies']} studies per row."
    )
    floor = (
        f"Fewer than {stats.MIN_SEEDS} seeds: the report gives a mean only, no interval or mark."
    )
    return "\n".join([LEGEND, textwrap.fill(model, 100), floor])
