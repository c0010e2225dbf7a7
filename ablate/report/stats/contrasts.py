"""The report's contrasts: every compared arm against the reference arm, per base model ×
template, with the seed as the unit of inference.

- At equal steps: final eval pass@1 (diverged trials as 0, `measures.DIVERGED_RULE`), paired by
  seed (common random numbers): paired t-test, exact sign-flip test as a robustness column.
- At equal generated tokens: the same contrast at the token count every trial reached.
- A/A: a replicate arm against the arm it replicates; independent seed streams, so Welch's t.
Holm adjusts each family (one table's contrasts) together. Power: from the observed SD of the
paired differences, at alpha / m for a family of m contrasts (Bonferroni: a conservative bound
on Holm's first step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ablate.report.data.load import StudyData
from ablate.report.data.memo import per_study
from ablate.report.stats import inference
from ablate.report.stats import measures as m

POWER = 0.8
STEPS, TOKENS, AA = "equal steps", "equal tokens", "A/A"


@dataclass(frozen=True)
class ContrastRow:
    arm: str
    reference: str
    model: str
    template: str
    kind: str
    contrast: inference.Contrast
    p_holm: float = float("nan")
    family: int = 1
    mde: float = float("nan")
    seeds_for_observed: int | None = None
    seeds_for_effect: int | None = None
    tokens: float = float("nan")
    note: str = ""

    @property
    def significant(self) -> bool:
        return bool(np.isfinite(self.p_holm) and self.p_holm < inference.ALPHA)

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


def _paired_rows(
    data: StudyData, kind: str, values_for: Callable[[str, str], tuple[pd.Series, float, str]]
) -> list[ContrastRow]:
    ref, rows = data.reference_arm, []
    for model, template in _model_templates(data):
        if not _has_trials(data, ref, model, template):
            continue
        values, tokens, note = values_for(model, template)
        r = m.by_seed(data, values, ref, model, template, with_diverged=True)
        for arm in data.compared_arms:
            if arm == ref or not _has_trials(data, arm, model, template):
                continue
            a = m.by_seed(data, values, arm, model, template, with_diverged=True)
            c = inference.paired_contrast(*m.matched(a, r))
            rows.append(ContrastRow(arm, ref, model, template, kind, c, tokens=tokens, note=note))
    return rows


def _final_pass_at_1(data: StudyData) -> Callable[[str, str], tuple[pd.Series, float, str]]:
    values = m.headline(data, m.final_value(data.history, "eval/pass_at_1"))
    return lambda model, template: (values, float("nan"), "final eval")


def _at_tokens(data: StudyData) -> Callable[[str, str], tuple[pd.Series, float, str]]:
    def values_for(model: str, template: str) -> tuple[pd.Series, float, str]:
        values, tokens, how = m.at_equal_tokens(data, model, template)
        return m.headline(data, values), tokens, how

    return values_for


def with_holm_and_power(rows: list[ContrastRow], effect: float | None) -> list[ContrastRow]:
    """Holm over the family `rows`; power columns at alpha / m, m = the rows with a test (a
    contrast under MIN_SEEDS seeds has none and does not count)."""
    if not rows:
        return rows
    adjusted = inference.holm([r.contrast.p_value for r in rows])
    tests = sum(np.isfinite(r.contrast.p_value) for r in rows)
    alpha = inference.ALPHA / max(tests, 1)
    out = []
    for row, p in zip(rows, adjusted, strict=True):
        c = row.contrast
        observed = abs(c.diff.value)
        for_effect = inference.seeds_needed(effect, c.sd, alpha, POWER) if effect else None
        out.append(
            replace(
                row,
                p_holm=float(p),
                family=tests,
                mde=inference.mde_paired(c.sd, c.n, alpha=alpha, power=POWER),
                seeds_for_observed=inference.seeds_needed(observed, c.sd, alpha, POWER),
                seeds_for_effect=for_effect,
            )
        )
    return out


@per_study
def headline_contrasts(data: StudyData) -> list[ContrastRow]:
    """Every compared arm vs the reference at equal steps (final eval), one Holm family."""
    rows = _paired_rows(data, STEPS, _final_pass_at_1(data))
    return with_holm_and_power(rows, data.effect_of_interest)


@per_study
def token_contrasts(data: StudyData) -> list[ContrastRow]:
    """The same contrasts at equal generated tokens, their own Holm family."""
    rows = _paired_rows(data, TOKENS, _at_tokens(data))
    return with_holm_and_power(rows, data.effect_of_interest)


@per_study
def replicate_contrasts(data: StudyData) -> list[ContrastRow]:
    """Each A/A replicate against its original (Welch: the seed streams are independent);
    their own Holm family. A significant row is a calibration failure."""
    values = m.headline(data, m.final_value(data.history, "eval/pass_at_1"))
    rows = []
    for replicate, original in data.replicates.items():
        for model, template in _model_templates(data):
            if not _has_trials(data, replicate, model, template):
                continue
            a = m.by_seed(data, values, replicate, model, template, with_diverged=True)
            b = m.by_seed(data, values, original, model, template, with_diverged=True)
            c = inference.welch_contrast(a.dropna().to_numpy(), b.dropna().to_numpy())
            rows.append(ContrastRow(replicate, original, model, template, AA, c))
    return with_holm_and_power(rows, data.effect_of_interest)


def template_contrasts(passk: pd.DataFrame, k: int = 1) -> pd.DataFrame:
    """Per model, each template against the model's first template: Δ pass@k, a normal CI from
    the two reported CIs (treated as independent: conservative for shared problems), p-value and
    its Holm adjustment across all contrasts."""
    from scipy.stats import norm

    rows = []
    p = passk[passk["k"] == k]
    for model, cell in p.groupby("model", sort=False):
        ref = cell.iloc[0]
        for _, other in cell.iloc[1:].iterrows():
            se = np.hypot(*((r["ci_high"] - r["ci_low"]) / (2 * 1.96) for r in (ref, other)))
            d = other["pass_at_k"] - ref["pass_at_k"]
            pv = 2 * norm.sf(abs(d) / se) if se > 0 else float(d == 0) or 0.0
            rows.append(dict(model=model, template=other["template"], ref=ref["template"], diff=d))
            rows[-1].update(low=d - 1.96 * se, high=d + 1.96 * se, p=pv, n=int(ref["n_problems"]))
    out = pd.DataFrame(rows)
    if len(out):
        out["p_holm"] = inference.holm(out["p"].to_numpy())
    return out
