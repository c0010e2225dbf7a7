"""Analytic claims: properties of the loss computed from the presets, true or false by
construction whatever the data (verdict "holds by construction" or "does not hold"). Reported
apart from the empirical claims and never among their verdicts.
"""

from __future__ import annotations

from ablate.baselines import baseline
from ablate.factors.objective import AGGREGATIONS
from ablate.report.claims.rules import FAILS, HOLDS, Claim
from ablate.report.data.load import StudyData


def token_weights(loss_agg: str, norm: int | None, long: int, short: int) -> tuple[float, float]:
    """d(aggregated loss)/d(per-token loss) on a token of a long and of a short completion in
    one batch: the weight each aggregation gives a token of each length."""
    import torch

    width = max(long, short)
    mask = torch.zeros(2, width)
    mask[0, :long], mask[1, :short] = 1.0, 1.0
    loss = torch.zeros(2, width, requires_grad=True)
    AGGREGATIONS.get(loss_agg)(loss, mask, norm, torch.arange(2)).backward()
    return float(loss.grad[0, 0]), float(loss.grad[1, 0])


def claim_length_norm_downweights_long_tokens(data: StudyData) -> Claim:
    """Claim 1a (Liu et al. 2025, Dr. GRPO §3.1, "response-level length bias"): GRPO's 1/|o_i|
    gives a token of a long completion less weight than one of a short completion; Dr. GRPO's
    constant weights both alike. Analytic: read off the gradient of each preset's loss
    aggregation at the study's generation budget, no training."""

    budget = data.max_new_tokens or 80
    long, short = max(2, int(0.75 * budget)), max(1, int(0.375 * budget))
    ratios = {}
    for name in ("grpo", "dr_grpo"):
        algo = baseline(name).resolve(max_new_tokens=budget)
        w_long, w_short = token_weights(algo.loss_agg, algo.loss_norm_constant, long, short)
        ratios[name] = w_long / w_short
    return length_norm_weighting_verdict(ratios["grpo"], ratios["dr_grpo"], long, short)


def length_norm_weighting_verdict(
    grpo_ratio: float, dr_ratio: float, long: int, short: int
) -> Claim:
    """GRPO must weight a long token less (ratio < 1) and Dr. GRPO equally (ratio = 1)."""
    ok = grpo_ratio < 1 - 1e-9 and abs(dr_ratio - 1) < 1e-9
    return Claim(
        id="1a",
        statement="GRPO's 1/|o| gives each token of a long incorrect completion less weight than "
        "a short one's (long wrong answers are penalised less per token); Dr. GRPO's constant "
        "does not",
        statistic=f"per-token weight ratio long/short ({long} vs {short} tokens), GRPO",
        value=grpo_ratio,
        verdict=HOLDS if ok else FAILS,
        arms="presets grpo, dr_grpo (computed from the loss, no training)",
        note=f"Dr. GRPO ratio {dr_ratio:.3f}",
    )


ANALYTIC = (claim_length_norm_downweights_long_tokens,)


def analytic_claims(data: StudyData) -> list[Claim]:
    return [fn(data) for fn in ANALYTIC]
