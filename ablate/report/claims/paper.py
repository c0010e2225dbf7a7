"""The findings of "Tricks or Traps? A Deep Dive into RL for LLM Reasoning" (Liu et al. 2025,
arXiv 2508.08221) as tested claims on the studies `studies/tricks_or_traps*.py`.

Each finding names the paper's statement and direction, the study and rung where ablate tests
it, the two arms (they differ in the finding's factor only), the measure (final held-out
pass@1, or a length) and the mechanism metric that should explain it. Directional findings are
paired t-tests by seed, Holm-adjusted together and judged by `claim_rules.verdict`; a finding of
"no effect" (clip-higher on a base model, overlong filtering at a long maximum length) is
supported only when the whole 95% interval lies within ±`NO_EFFECT_MARGIN`, contradicted by a
significant difference, and inconclusive otherwise. The paper reports no seeds or intervals: its
column gives its own words and, where it prints one, its number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ablate.report.claims import rules as rules
from ablate.report.data.load import StudyData
from ablate.report.stats import inference
from ablate.report.stats import measures as m

#: Δ pass@1 inside which "no effect" is supported: a quarter of the base rung's RL gain here.
NO_EFFECT_MARGIN = 0.03
TEMPLATE = "plain"


@dataclass(frozen=True)
class Finding:
    id: str
    paper: str
    """The paper's finding, in its words (section / takeaway)."""
    statement: str
    """What ablate tests: arm minus reference, on the measure, in this direction."""
    study: str
    model: str
    arm: str
    reference: str
    direction: int
    """+1 / -1: the sign the paper predicts for arm minus reference; 0: no effect."""
    mechanism: str
    """The training metric (mean over steps) that should explain the effect."""
    measure: str = "eval/pass_at_1"


FINDINGS = (
    Finding(
        "std_easy",
        "Takeaway 2: remove the std when rewards are concentrated (easy data)",
        "no std − group std, pass@1, easy data, base rung: > 0",
        "tricks_or_traps", "rl_ready", "no_std", "grpo4", +1, "policy/grad_norm",
    ),
    Finding(
        "std_hard",
        "Takeaway 2: on harder data the std normalisation stays useful",
        "no std − group std, pass@1, hard data, base rung: < 0",
        "tricks_or_traps_hard", "rl_ready", "no_std", "grpo4", -1, "policy/grad_norm",
    ),
    Finding(
        "batch_std_easy",
        "Takeaway 3: group mean + batch std is the most robust normalisation",
        "batch std − group std, pass@1, easy data, base rung: > 0",
        "tricks_or_traps", "rl_ready", "batch_std", "grpo4", +1, "policy/grad_norm",
    ),
    Finding(
        "batch_std_hard",
        "Takeaway 3: group mean + batch std is the most robust normalisation",
        "batch std − group std, pass@1, hard data, base rung: > 0",
        "tricks_or_traps_hard", "rl_ready", "batch_std", "grpo4", +1, "policy/grad_norm",
    ),
    Finding(
        "clip_higher_aligned",
        "Takeaway 4: clip-higher helps aligned models (slows entropy collapse)",
        "clip_high 0.28 − 0.2, pass@1, aligned rung: > 0",
        "tricks_or_traps", "aligned", "clip_higher", "grpo4", +1, "policy/clip_frac_high",
    ),
    Finding(
        "clip_higher_base",
        "Takeaway 4: on base models clip-higher has little effect (upper clip rate ≈ 0.003)",
        "clip_high 0.28 − 0.2, pass@1, base rung: within ±0.03",
        "tricks_or_traps", "rl_ready", "clip_higher", "grpo4", 0, "policy/clip_frac_high",
    ),
    Finding(
        "token_agg_base",
        "Takeaway 7: token-level loss aggregation is better for base models",
        "token mean − sequence mean, pass@1, base rung: > 0",
        "tricks_or_traps", "rl_ready", "token_agg", "grpo4", +1, "length/incorrect_mean",
    ),
    Finding(
        "token_agg_aligned",
        "Takeaway 7: sequence-level aggregation is better for aligned models",
        "token mean − sequence mean, pass@1, aligned rung: < 0",
        "tricks_or_traps", "aligned", "token_agg", "grpo4", -1, "length/incorrect_mean",
    ),
    Finding(
        "overlong_short",
        "Takeaway 8: overlong filtering helps at a short maximum length (8k)",
        "filter − none, pass@1, 40 new tokens: > 0",
        "tricks_or_traps_short", "rl_ready", "overlong_filter", "grpo4", +1,
        "length/truncation_rate",
    ),
    Finding(
        "overlong_long",
        "Takeaway 8: ... and little at a long one (20k)",
        "filter − none, pass@1, 80 new tokens: within ±0.03",
        "tricks_or_traps_long", "rl_ready", "overlong_filter", "grpo4", 0,
        "length/truncation_rate",
    ),
    Finding(
        "lite_ppo_vs_grpo",
        "§5: Lite PPO (group-mean/batch-std, token-level) beats GRPO (base models, Fig. 15)",
        "Lite PPO − GRPO, pass@1, easy data, base rung: > 0",
        "tricks_or_traps", "rl_ready", "lite_ppo", "grpo4", +1, "policy/entropy",
    ),
    Finding(
        "lite_ppo_vs_dapo",
        "§5: Lite PPO beats DAPO (base models, Fig. 15)",
        "Lite PPO − DAPO, pass@1, easy data, base rung: > 0",
        "tricks_or_traps", "rl_ready", "lite_ppo", "dapo4", +1, "policy/entropy",
    ),
    Finding(
        "lite_ppo_vs_grpo_hard",
        "§5: Lite PPO beats GRPO on hard data too (Qwen3-8B hard: 66.96 vs DAPO 64.17)",
        "Lite PPO − GRPO, pass@1, hard data, base rung: > 0",
        "tricks_or_traps_hard", "rl_ready", "lite_ppo", "grpo4", +1, "policy/entropy",
    ),
    Finding(
        "length_bias",
        "Dr. GRPO §3.1 (revisited): GRPO's 1/|o| lets incorrect answers grow longer",
        "GRPO − Dr. GRPO, length of incorrect training samples, last quarter: > 0",
        "tricks_or_traps_length", "tail_ready", "grpo4", "dr_grpo4", +1,
        "length/self_check_rate_incorrect",
        measure="length/incorrect_mean",
    ),
)  # fmt: skip


def per_trial(data: StudyData, finding: Finding) -> pd.Series:
    """trial_id -> the finding's measure: final eval pass@1 (diverged trials as 0), or a
    training metric's mean over the last quarter of steps."""
    if finding.measure.startswith("eval/"):
        return m.headline(data, m.final_value(data.history, finding.measure))
    return m.window_mean(data.history, finding.measure, 0.75, 1.0)


def test_finding(finding: Finding, data: StudyData | None) -> rules.Claim:
    base = rules.Claim(
        id=finding.id,
        statement=finding.statement,
        statistic=f"Δ {finding.measure.split('/')[-1]}",
        arms=f"{finding.arm} vs {finding.reference} on {finding.model}",
        direction=finding.direction,
    )
    if data is None:
        return rules.untested(base, f"study {finding.study} has no results")
    values = per_trial(data, finding)
    a = m.by_seed(data, values, finding.arm, finding.model, TEMPLATE, with_diverged=True)
    b = m.by_seed(data, values, finding.reference, finding.model, TEMPLATE, with_diverged=True)
    contrast = inference.paired_contrast(*m.matched(a, b))
    claim = rules.tested(base, contrast.diff, contrast.p_value, note=_mechanism(data, finding))
    if finding.direction == 0 and claim.verdict == rules.INCONCLUSIVE:
        return replace(claim, verdict=_no_effect_verdict(claim))
    return claim


def _no_effect_verdict(c: rules.Claim) -> str:
    if math.isfinite(c.p_value) and c.p_value < rules.ALPHA:
        return rules.CONTRADICTED
    inside = c.low >= -NO_EFFECT_MARGIN and c.high <= NO_EFFECT_MARGIN
    return rules.SUPPORTED if inside else rules.INCONCLUSIVE


def _mechanism(data: StudyData, finding: Finding) -> str:
    """'metric: arm x vs reference y' (means over steps, then seeds)."""
    rows = data.history[data.history["metric"] == finding.mechanism]
    per_trial = rows.groupby("trial_id")["value"].mean()
    out = []
    for arm in (finding.arm, finding.reference):
        seeds = m.by_seed(data, per_trial, arm, finding.model, TEMPLATE)
        out.append(f"{np.nanmean(seeds.to_numpy()):.4g}" if seeds.notna().any() else "n/a")
    return f"{finding.mechanism}: {out[0]} vs {out[1]}"


def tricks_claims(studies: dict[str, StudyData | None]) -> list[rules.Claim]:
    """Every finding tested on its study's data; the directional ones Holm-adjusted together."""
    claims = [test_finding(f, studies.get(f.study)) for f in FINDINGS]
    directional = [c.direction != 0 and c.verdict == rules.INCONCLUSIVE for c in claims]
    adjusted = rules.adjudicate([c for c, d in zip(claims, directional, strict=True) if d])
    it = iter(adjusted)
    return [next(it) if d else c for c, d in zip(claims, directional, strict=True)]


def claims_table(claims: list[rules.Claim]) -> pd.DataFrame:
    """The claims beside the paper's findings: one row per finding."""
    paper = {f.id: f.paper for f in FINDINGS}
    rows = []
    for c in claims:
        interval = f"[{c.low:+.3f}, {c.high:+.3f}]" if math.isfinite(c.low) else ""
        value = f"{c.value:+.3f}" if math.isfinite(c.value) else "—"
        rows.append(
            {
                "finding": c.id,
                "paper": paper[c.id],
                "tested here": c.statement,
                "Δ [95% CI]": f"{value} {interval}".strip(),
                "seeds": c.n,
                "p (Holm)": f"{c.p_holm:.3g}" if math.isfinite(c.p_holm) else "—",
                "verdict": c.verdict,
                "mechanism (arm vs reference)": c.note,
            }
        )
    return pd.DataFrame(rows)
