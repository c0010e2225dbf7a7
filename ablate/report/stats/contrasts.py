"""The report's contrasts: every compared arm against the reference arm, per base model ×
template, about the task.

- Task-level reading (the default, whenever per-problem eval records exist): the per-(seed,
  problem) differences arm − reference (common random numbers: same seeds, same eval problems)
  go through the crossed seed × problem analysis of `crossed`, so the interval covers the
  task's mean difference, not only these J problems' (an arm × problem interaction widens it).
  The fixed-problem reading (paired t over per-seed means, conditional on the J problems) is
  kept beside it, labelled.
- At equal steps: final eval pass@1 among the seeds where both arms survived, with divergence
  as its own outcome beside it (`stats.divergence`: the rates' exact test and the hurdle Δ;
  `measures.DIVERGED_RULE`). Without divergence this is every seed, as before.
- At equal generated tokens: the eval made on reaching the token mark every trial reached.
- A/A: a replicate arm against its twin, on the same paired path (it shares their data order
  and eval samples; only its rollouts differ). Positive control: its own family.
Holm adjusts each family (one table's contrasts). Three verdicts: *different* (Holm p < 0.05),
*equivalent* within ±margin (TOST: the 90% interval inside the margin) or *inconclusive*.
Power: the MDE at alpha / m with the seed component at its one-sided 80% upper confidence bound
(a few seeds underestimate it about half the time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy import stats as sps

from ablate.report.data.load import StudyData
from ablate.report.data.memo import per_study
from ablate.report.stats import crossed, inference, took_effect
from ablate.report.stats import divergence as dv
from ablate.report.stats import measures as m
from ablate.report.stats import problems as pr
from ablate.report.stats.design import upper_factor
from ablate.report.stats.sequential import CONTINUE
from ablate.report.stats.sequential_data import replay_study

POWER = 0.8
STEPS, TOKENS, AA, CONTROL = "equal steps", "equal tokens", "A/A", "positive control"
GRADED = "graded control"
TASK, FIXED = "task", "fixed problems"
DIFFERENT, EQUIVALENT, INCONCLUSIVE = "different", "equivalent", "inconclusive"
NOT_TESTABLE = took_effect.NOT_TESTABLE  # the arm's factor barely ran (`took_effect`)


@dataclass(frozen=True)
class ContrastRow:
    arm: str
    reference: str
    model: str
    template: str
    kind: str
    contrast: inference.Contrast  # the task-level reading when per-problem records exist
    p_holm: float = float("nan")
    family: int = 1
    mde: float = float("nan")
    tokens: float = float("nan")
    note: str = ""
    reading: str = FIXED  # TASK: seeds × problems; FIXED: seeds only, given these problems
    problems: int = 0  # J eval problems of the task-level reading
    fixed: inference.Contrast | None = None  # the fixed-problem reading, for comparison
    interval90: tuple[float, float] = (float("nan"), float("nan"))  # TOST's interval
    margin: float | None = None
    verdict: str = INCONCLUSIVE
    diffs: np.ndarray | None = field(default=None, repr=False, compare=False)
    """The [n, J] per-(seed, problem) differences of the task-level reading."""
    divergence: dv.Divergence | None = None  # headline rows: divergence as its own outcome

    @property
    def significant(self) -> bool:
        return self.verdict == DIFFERENT

    @property
    def n(self) -> int:
        return self.contrast.n

    @property
    def cell(self) -> str:
        return f"{self.model} · {self.template}"


def _model_templates(data: StudyData) -> list[tuple[str, str]]:
    return list(dict.fromkeys((model, t) for _, model, t in m.cells(data)))


def _has_trials(data: StudyData, arm: str, model: str, template: str) -> bool:
    t = data.trials
    return bool(((t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)).any())


def task_contrast(arm: np.ndarray, reference: np.ndarray) -> tuple[inference.Contrast, tuple]:
    """arm − reference from matched [n, J] matrices: the crossed estimate with its 95% interval,
    p-value and (as robustness) the exact sign-flip test of the per-seed mean differences; and
    the 90% interval TOST reads."""
    d = arm - reference  # [n, J]
    c = crossed.crossed(d)
    mean, half = float(c.mean), float(c.half_width())
    half90 = float(c.half_width(crossed.EQUIVALENCE_CONFIDENCE))
    seed_diffs = d.mean(axis=1)  # [n]
    sd = float(seed_diffs.std(ddof=1)) if c.n >= 2 else float("nan")
    est = inference.Estimate(mean, mean - half, mean + half, c.n, sd)
    flip = float(inference.sign_flip_p(seed_diffs))
    contrast = inference.Contrast(est, float(c.p_value()), flip, sd, c.n, "crossed t")
    return contrast, (mean - half90, mean + half90)


def fixed_contrast(arm: np.ndarray, reference: np.ndarray) -> tuple[inference.Contrast, tuple]:
    """The fixed-problem reading: paired t over per-seed values (given these problems)."""
    c = inference.paired_contrast(arm, reference)
    half90 = float(inference.t_half_width(c.sd, c.n, crossed.EQUIVALENCE_CONFIDENCE))
    return c, (c.diff.value - half90, c.diff.value + half90)


def mde_task(d: np.ndarray, alpha: float, power: float = POWER) -> float:
    """Smallest |Δ| detected with `power` at level alpha from per-(seed, problem) differences
    d [n, J], with the seed component at its one-sided 80% upper confidence bound (normal shift
    of the t quantiles at the Satterthwaite df)."""
    c = crossed.crossed(d)
    if c.n < inference.MIN_SEEDS or not float(c.se) > 0:
        return float("nan")
    inflate = upper_factor(c.n)
    var = (c.seed_var * inflate / c.n + c.problem_var / c.problems) + c.resid_var / (
        c.n * c.problems
    )
    var = max(float(var), float(c.se) ** 2)
    quantiles = sps.t.ppf(1 - alpha / 2, c.df) + sps.t.ppf(power, c.df)
    return float(quantiles * np.sqrt(var))


Values = Callable[[str, str, str], tuple[pd.DataFrame | pd.Series, float, str]]


def _pair(data: StudyData, values: Values, arm: str, ref: str, model: str, template: str):
    """(contrast, 90% interval, reading, J, fixed contrast, d or None, tokens, note)."""
    a, tokens, note = values(arm, model, template)
    r, _, _ = values(ref, model, template)
    if isinstance(a, pd.DataFrame) and isinstance(r, pd.DataFrame):
        x, y = pr.matched(a, r)
        if x.size and x.shape[1] >= 2:
            fixed = fixed_contrast(x.mean(axis=1), y.mean(axis=1))[0]
            c, i90 = task_contrast(x, y)
            return c, i90, TASK, x.shape[1], fixed, x - y, tokens, note
    # per-seed means where one side has per-problem records and the other (all failed) none
    a, r = (v.mean(axis=1) if isinstance(v, pd.DataFrame) else v for v in (a, r))
    c, i90 = fixed_contrast(*m.matched(a, r))
    return c, i90, FIXED, 0, c, None, tokens, note


def _rows(data: StudyData, kind: str, values: Values, pairs) -> list[ContrastRow]:
    rows = []
    for arm, ref, model, template in pairs:
        c, i90, reading, J, fixed, d, tokens, note = _pair(data, values, arm, ref, model, template)
        row = ContrastRow(arm, ref, model, template, kind, c, tokens=tokens, note=note)
        rows.append(replace(row, reading=reading, problems=J, fixed=fixed, interval90=i90, diffs=d))
    return rows


def _compared_pairs(data: StudyData) -> list[tuple[str, str, str, str]]:
    ref = data.reference_arm
    return [
        (arm, ref, model, template)
        for model, template in _model_templates(data)
        if _has_trials(data, ref, model, template)
        for arm in data.compared_arms
        if arm != ref and _has_trials(data, arm, model, template)
    ]


def _final(data: StudyData) -> Values:
    """Per-problem matrices at each trial's final eval, surviving trials only; per-seed values
    when none are logged."""
    rates = pr.final_rates(data)
    values = m.final_value(data.history, "eval/pass_at_1")

    def values_for(arm: str, model: str, template: str):
        cell = None
        if len(rates):
            cell = pr.cell_matrix(data, rates, arm, model, template, diverged=False)
        if cell is not None and not cell.empty:
            return cell, float("nan"), "final eval"
        by_seed = m.by_seed(data, values, arm, model, template)
        return by_seed, float("nan"), "final eval"

    return values_for


def _at_tokens(data: StudyData) -> Values:
    def values_for(arm: str, model: str, template: str):
        values, tokens, how = m.at_equal_tokens(data, model, template)
        steps = m.token_mark_steps(data, model, template)
        if steps is not None and len(data.samples):
            s = data.samples
            at = s["trial_id"].map(steps)
            rates = pr.rates_at(s[s["step"] == at])
            cell = pr.cell_matrix(data, rates, arm, model, template, diverged=False)
            if not cell.empty:
                return cell, tokens, how
        by_seed = m.by_seed(data, m.headline(data, values), arm, model, template)
        return by_seed, tokens, how

    return values_for


def verdict(p_holm: float, interval90: tuple[float, float], margin: float | None) -> str:
    """different (Holm p < alpha), equivalent (TOST inside ±margin) or inconclusive."""
    if np.isfinite(p_holm) and p_holm < inference.ALPHA:
        return DIFFERENT
    if bool(crossed.equivalent(interval90[0], interval90[1], margin)):
        return EQUIVALENT
    return INCONCLUSIVE


def with_holm_and_power(rows: list[ContrastRow], margin: float | None) -> list[ContrastRow]:
    """Holm over the family `rows`, verdicts, and the MDE at alpha / m (m = rows with a test)."""
    if not rows:
        return rows
    adjusted = inference.holm([r.contrast.p_value for r in rows])
    tests = sum(np.isfinite(r.contrast.p_value) for r in rows)
    alpha = inference.ALPHA / max(tests, 1)
    out = []
    for row, p in zip(rows, adjusted, strict=True):
        d, c = row.diffs, row.contrast
        mde = (
            mde_task(d, alpha)
            if d is not None
            else inference.mde_paired(_sd_upper(c.sd, c.n), c.n, alpha=alpha, power=POWER)
        )
        v = verdict(float(p), row.interval90, margin) if c.n >= inference.MIN_SEEDS else ""
        out.append(replace(row, p_holm=float(p), family=tests, mde=mde, margin=margin, verdict=v))
    return out


def _sd_upper(sd: float, n: int) -> float:
    if n < 2 or not np.isfinite(sd):
        return float("nan")
    return sd * float(np.sqrt(upper_factor(n)))


@per_study
def headline_contrasts(data: StudyData) -> list[ContrastRow]:
    """Every compared arm vs the reference at equal steps (final eval, surviving seeds), one
    Holm family, each with its divergence (`with_divergence`); with a sequential design
    (`looks`), each verdict is the design's (`sequential_verdicts`)."""
    rows = _rows(data, STEPS, _final(data), _compared_pairs(data))
    rows = with_divergence(data, with_holm_and_power(rows, data.margin))
    return took_effect.inert_verdicts(data, sequential_verdicts(data, rows))


def with_divergence(data: StudyData, rows: list[ContrastRow]) -> list[ContrastRow]:
    """Each row's divergence counts, exact test (Holm over the rows) and hurdle Δ."""
    found = [
        dv.contrast_divergence(data, r.arm, r.reference, (r.model, r.template), r.diffs, r.contrast)
        for r in rows
    ]
    return [replace(r, divergence=d) for r, d in zip(rows, dv.with_holm(found), strict=True)]


UNDECIDED = "undecided: looks remain"


def sequential_verdicts(data: StudyData, rows: list[ContrastRow]) -> list[ContrastRow]:
    """The verdicts of the study's sequential design replayed on its results (alpha spent over
    the looks, Bonferroni over the primary family): they replace the fixed-design ones."""
    if not data.looks or data.primary != STEPS:
        return rows
    results = replay_study(data)
    out = []
    for row in rows:
        res = results.get((row.arm, row.model, row.template))
        if res is None or res.final is None:
            out.append(row)
            continue
        look = res.final
        verdict = UNDECIDED if res.verdict == CONTINUE else res.verdict
        note = f"look {look.look} of {len(data.looks)} ({look.seeds} seeds)"
        if look.seeds_cannot_help:
            note += "; seeds cannot help: more problems or samples would"
        out.append(replace(row, verdict=verdict, note=note))
    return out


@per_study
def token_contrasts(data: StudyData) -> list[ContrastRow]:
    """The same contrasts at equal generated tokens, their own Holm family."""
    rows = _rows(data, TOKENS, _at_tokens(data), _compared_pairs(data))
    return took_effect.inert_verdicts(data, with_holm_and_power(rows, data.margin))


def primary_contrasts(data: StudyData) -> list[ContrastRow]:
    """The study's declared primary family."""
    return token_contrasts(data) if data.primary == TOKENS else headline_contrasts(data)


def _cells_of(data: StudyData, arm: str, ref: str) -> list[tuple[str, str, str, str]]:
    return [
        (arm, ref, model, template)
        for model, template in _model_templates(data)
        if _has_trials(data, arm, model, template) and _has_trials(data, ref, model, template)
    ]


@per_study
def replicate_contrasts(data: StudyData) -> list[ContrastRow]:
    """Each A/A replicate against its twin, paired (common random numbers); their own Holm
    family. A *different* row is a calibration failure."""
    pairs = [p for rep, orig in data.replicates.items() for p in _cells_of(data, rep, orig)]
    return with_holm_and_power(_rows(data, AA, _final(data), pairs), data.margin)


@per_study
def control_contrasts(data: StudyData) -> list[ContrastRow]:
    """The positive control against the reference, per cell, its own Holm family: the study
    could detect a real effect iff the verdict is *different*."""
    return _control_rows(data, CONTROL, data.positive_control)


@per_study
def graded_contrasts(data: StudyData) -> list[ContrastRow]:
    """The graded control (a declared, smaller effect) against the reference, per cell, its own
    Holm family: detected or not at its declared effect (`controls.control_power`)."""
    return _control_rows(data, GRADED, data.graded_control)


def _control_rows(data: StudyData, kind: str, control: str | None) -> list[ContrastRow]:
    if not control:
        return []
    pairs = _cells_of(data, control, data.reference_arm)
    return with_holm_and_power(_rows(data, kind, _final(data), pairs), data.margin)
