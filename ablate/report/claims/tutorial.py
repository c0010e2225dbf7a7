"""The tutorial's claims of the GRPO-family papers as testable statements, each with its
statistic, N, p-value and verdict. Each claim keeps its report ID (1b, 2 ... 6; 1a is analytic,
`claims.analytic`); its function is named for what it tests.

Verdict rule (fixed in advance, the same for every empirical claim: `claims.rules`): each
claim's test gives a two-sided p-value; Holm adjusts them once over the claims tested in the
study; "supported" when the adjusted p < 0.05 with the estimate in the predicted direction and,
up to 10 seeds, the exact sign-flip test Holm-adjusted the same way agrees ("not testable at n
seeds" when it cannot: its smallest p at 5 seeds is 0.0625), "equivalent within ±δ" when the 90%
interval lies inside the study's margin δ (claim 5, on the pass@1 scale; the others' scales have
no declared margin), "contradicted" only when the interval lies beyond the margin on the opposite
side, otherwise "inconclusive". The seed is the unit of the training-metric claims (1b, 2, 3:
per-trial values averaged within a seed, N counts seeds, never trials, read "seed-level"); claim
6, on eval pass rates, is about the task, seeds × problems (`claims.headroom`). A claim whose
arms differ in more than the claim's factor(s) is "not tested", naming the extra differences;
one whose factor barely acts in the run, or whose test cannot reach p < 0.05 at all, is "not
testable at this setting".
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pandas as pd

from ablate.report.claims import rules as r
from ablate.report.claims.arms import ACTS_MIN, activity, arms_where, exact_pair, main_cell
from ablate.report.claims.headroom import claim_rl_raises_pass_at_1_more_than_pass_at_k
from ablate.report.claims.rules import (
    ALPHA,
    EXACT_PERMUTATIONS_MAX,
    INCONCLUSIVE,
    NAN,
    NO_SIGNAL_PASS_AT_G,
    NOT_TESTABLE,
    Claim,
    adjudicate,
)
from ablate.report.data.load import StudyData
from ablate.report.data.memo import per_study
from ablate.report.stats import measures as m
from ablate.report.stats.template_contrasts import template_contrasts


# --- (1b) length growth of incorrect answers, (2) clip-higher and entropy ---------------------
def claim_std_norm_lengthens_wrong_answers(data: StudyData) -> Claim:
    """Claim 1b (Liu et al. 2025, Dr. GRPO §3.1): under GRPO's std scaling and per-sequence
    length normalisation, incorrect answers grow longer over training than under Dr. GRPO."""
    base = Claim(
        id="1b",
        statement="with std scaling and per-sequence length normalisation (GRPO), incorrect "
        "answers grow longer over training than under Dr. GRPO",
        statistic="paired Δ (GRPO − Dr. GRPO) of the growth of incorrect-answer length "
        "(last − first quarter of training, tokens)",
    )
    grpo = arms_where(
        data, lambda a: a.scale == "group_std" and a.loss_agg == "seq_mean_token_mean"
    )
    dr = arms_where(data, lambda a: a.scale == "none" and a.loss_agg == "seq_mean_token_sum_norm")
    pair, why = exact_pair(data, grpo, dr, {"scale", "loss_agg", "loss_norm_constant"})
    if pair is None:
        return r.untested(base, why or "needs a GRPO-like and a Dr. GRPO-like arm")
    return r.pair_claim(base, data, m.trend(data.history, "length/incorrect_mean"), pair)


def claim_clip_higher_keeps_entropy(data: StudyData) -> Claim:
    """Claim 2 (Yu et al. 2025, DAPO §3.1 Clip-Higher): a larger upper clip keeps token entropy
    higher than a symmetric clip. Not testable when the upper clip rarely binds."""
    base = Claim(
        id="2",
        statement="clip-higher keeps token entropy higher than symmetric clipping",
        statistic="paired Δ (clip-higher − symmetric) of mean token entropy, last quarter",
    )
    # token-level ratios only: GSPO's sequence-ratio clip range is a different quantity
    high = arms_where(data, lambda a: a.ratio_level == "token" and a.clip_high > a.clip_low)
    sym = arms_where(data, lambda a: a.ratio_level == "token" and a.clip_high == a.clip_low)
    pair, why = exact_pair(data, high, sym, {"clip_high", "clip_low"})
    if pair is None:
        return r.untested(base, why or "needs a clip-higher and a symmetric-clip arm")
    arms = f"{pair[0]} vs {pair[1]}"
    binds = activity(data, "policy/clip_frac_high", pair, *main_cell(data))
    note = f"upper clip binds on {binds:.2%} of tokens (the larger of {pair[0]} and {pair[1]})"
    if not np.isfinite(binds):  # e.g. cispo's arms: only the clip family logs a clip fraction
        note = f"{pair[1]} logs no clip fraction (only the clip and clip_cov surrogates do)"
        return r.untested(base, note, NOT_TESTABLE, arms=arms)
    if binds < ACTS_MIN:
        note += f": under {ACTS_MIN:.0%}, the factor barely acts here"
        return r.untested(base, note, NOT_TESTABLE, arms=arms)
    entropy = m.window_mean(data.history, "entropy/mean", 0.75, 1.0)
    return r.pair_claim(base, data, entropy, pair, note)


# --- (3) token vs sequence ratio variance against length --------------------------------------
def _rho(frame: pd.DataFrame, x: str, y: str) -> float:
    pts = frame[[x, y]].dropna()
    if len(pts) < 3 or np.ptp(pts[x]) == 0 or np.ptp(pts[y]) == 0:
        return NAN
    return float(pts[x].rank().corr(pts[y].rank()))


def claim_token_ratio_variance_grows_with_length(data: StudyData) -> Claim:
    """Claim 3 (Zheng et al. 2025, GSPO §3): the variance of token-level importance ratios grows
    with completion length; that of GSPO's length-normalised sequence ratio does not."""
    base = Claim(
        id="3",
        statement="token-ratio variance grows with completion length; the sequence ratio's "
        "does not",
        statistic="Spearman ρ(length, token-ratio var) − ρ(length, sequence-ratio var) across "
        "training steps, per trial, averaged within a seed (N = seeds)",
    )
    keys = ["length/mean", "policy/ratio_var", "policy/seq_ratio_var"]
    model, template = main_cell(data)
    done = data.complete()
    ids = done[(done["model"] == model) & (done["template"] == template)]["trial_id"]
    h = data.history[data.history["metric"].isin(keys) & data.history["trial_id"].isin(ids)]
    wide = h.pivot_table(index=["trial_id", "step"], columns="metric", values="value")
    if not set(keys) <= set(wide.columns):
        return r.untested(base, "ratio variances were not logged")
    diffs = {}
    for trial_id, one in wide.groupby(level="trial_id"):
        tok, seq = _rho(one, keys[0], keys[1]), _rho(one, keys[0], keys[2])
        if np.isfinite(tok):
            diffs[trial_id] = tok - (seq if np.isfinite(seq) else 0.0)
    if not diffs:
        note = "ratios constant (on-policy updates: the ratio is 1, its variance 0)"
        return r.untested(base, note, NOT_TESTABLE)
    values = r.seed_means(data, pd.Series(diffs))
    return r.one_sample(base, values, arms=f"all arms on {model} · {template}")


# --- (4) RL gain vs base Pass@G (claim 6: `claims.headroom`) -----------------------------------
def permutation_rho(x: np.ndarray, y: np.ndarray, *, seed: int = 0) -> tuple[float, float]:
    """Spearman ρ(x, y) and its two-sided permutation p-value over the pairing of x and y:
    exact for up to EXACT_PERMUTATIONS_MAX points, else 20,000 seeded permutations."""
    rx, ry = pd.Series(x).rank().to_numpy(), pd.Series(y).rank().to_numpy()

    def rho(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # a [n], b [perms, n] -> [perms]
        a, b = a - a.mean(), b - b.mean(axis=-1, keepdims=True)
        return (b @ a) / np.sqrt((a @ a) * (b * b).sum(axis=-1))

    observed = float(rho(rx, ry[None])[0])
    if len(x) <= EXACT_PERMUTATIONS_MAX:
        perms = np.array(list(itertools.permutations(ry)))
    else:
        gen = np.random.default_rng(seed)
        perms = np.vstack([ry, gen.permuted(np.tile(ry, (20000, 1)), axis=1)])
    null = np.abs(rho(rx, perms))
    return observed, float(np.mean(null >= abs(observed) - 1e-12))


def claim_gain_grows_with_base_pass_at_g(data: StudyData) -> Claim:
    """Claim 4: RL gain is ~0 where the base model's Pass@G is ~0 and grows with it (a group
    with no correct sample has zero group-relative advantage, so it teaches nothing)."""
    base = Claim(
        id="4",
        statement="RL gain is ~0 where base Pass@G is ~0 and grows with base Pass@G",
        statistic="Spearman ρ(base Pass@G, mean pass@1 gain over seeds) over (model, template) "
        "cells of one arm; permutation test over cells (N = cells)",
    )
    done = data.complete()
    per_arm = done.groupby("arm")[["model", "template"]].apply(lambda t: len(t.drop_duplicates()))
    if not len(per_arm) or per_arm.max() < 3:
        return r.untested(base, "needs one arm trained in >= 3 (model, template) cells")
    arm = data.reference_arm if per_arm.get(data.reference_arm, 0) >= 3 else per_arm.idxmax()
    rows = done[done["arm"] == arm].set_index("trial_id")[["model", "template"]]
    rows = rows.assign(gain=m.gains(data, 1), pass_g=m.base_pass_at_g(data)).dropna()
    cells = rows.groupby(["model", "template"])[["gain", "pass_g"]].mean()
    if len(cells) < 3 or np.ptp(cells["pass_g"]) == 0 or np.ptp(cells["gain"]) == 0:
        return r.untested(base, "needs >= 3 cells with differing base Pass@G and gains", arms=arm)
    rho, p = permutation_rho(cells["pass_g"].to_numpy(), cells["gain"].to_numpy())
    zero = cells[cells["pass_g"] < NO_SIGNAL_PASS_AT_G]["gain"]
    note = (
        f"mean gain where Pass@G < {NO_SIGNAL_PASS_AT_G}: {zero.mean():+.3f} ({len(zero)} cells)"
        if len(zero)
        else "no base model without signal"
    )
    reading = f"cells: {len(cells)} (model, template) cells, exact permutation test"
    fields = dict(value=rho, n=len(cells), p_value=p, arms=arm, note=note, reading=reading)
    floor = structural_min_p(len(cells))
    if floor >= ALPHA:  # no arrangement of the cells could decide it
        why = (
            f"with {len(cells)} cells the permutation test's smallest possible p is "
            f"2/{len(cells)}! = {floor:.3g} ≥ {ALPHA}: untestable with this few cells (needs 5)"
        )
        return replace(base, verdict=NOT_TESTABLE, **{**fields, "note": f"{note}; {why}"})
    return replace(base, verdict=INCONCLUSIVE, **fields)


def structural_min_p(cells: int) -> float:
    """The smallest two-sided p an exact permutation test of a rank correlation can give over
    `cells` points with distinct values: only the identity and the reversal reach |ρ| = 1, so
    2/n! (n = 4: 0.083, n = 5: 0.017). Above EXACT_PERMUTATIONS_MAX the Monte Carlo test's
    floor, 1/20,001, is far below alpha."""
    if cells > EXACT_PERMUTATIONS_MAX:
        return 1 / 20001
    return min(1.0, 2 / math.factorial(cells))


# --- (5) template sensitivity of base Pass@k --------------------------------------------------
def claim_template_changes_base_pass_at_k(data: StudyData) -> Claim:
    """Claim 5 (Liu et al. 2025, Dr. GRPO §2): the prompt template changes the base model's
    Pass@k. Measured on the Pass@G phase, before any training. The claim stands for every
    template contrast: each enters the claims' one Holm family with its raw p (adjusted once,
    there), and the claim takes the smallest; it is "equivalent" when every contrast's 90%
    interval lies inside the study's margin."""
    base = Claim(
        id="5",
        statement="the prompt template changes base Pass@k",
        statistic="largest |Δ pass@1| between templates of one base model (p Holm-adjusted once, "
        "over the claims and every template contrast; N = problems)",
        arms="Pass@G phase (no training)",
        direction=0,
        margin=data.margin,
    )
    contrasts = template_contrasts(data.passk) if len(data.passk) else pd.DataFrame()
    if not len(contrasts):
        return r.untested(base, "needs Pass@k of >= 2 templates per model")
    # a zero-width interval (both CIs empty) is no test, not p = 0 or 1
    p = contrasts["p"].where(contrasts["high"] > contrasts["low"])
    if not p.notna().any():
        return r.untested(base, "every template CI has zero width: no test", NOT_TESTABLE)
    top = contrasts.loc[p.idxmin()]
    se = (contrasts["high"] - contrasts["low"]) / (2 * 1.959964)  # the normal CI's SE
    z90 = 1.644854  # the 90% normal interval: TOST
    return replace(
        base,
        value=top["diff"],
        low=top["low"],
        high=top["high"],
        low90=float((contrasts["diff"] - z90 * se).min()),  # the envelope of every contrast
        high90=float((contrasts["diff"] + z90 * se).max()),
        n=int(top["n"]),
        p_value=float(p.min()),
        family=tuple(float(x) for x in p.dropna()),
        verdict=INCONCLUSIVE,
        note=f"{top['model']}: {top['template']} vs {top['ref']} ({len(contrasts)} contrasts)",
        reading="problems of the Pass@G phase (normal interval from each template's CI)",
    )


EMPIRICAL = (
    claim_std_norm_lengthens_wrong_answers,
    claim_clip_higher_keeps_entropy,
    claim_token_ratio_variance_grows_with_length,
    claim_gain_grows_with_base_pass_at_g,
    claim_template_changes_base_pass_at_k,
    claim_rl_raises_pass_at_1_more_than_pass_at_k,
)


@per_study
def evaluate_claims(data: StudyData) -> list[Claim]:
    """Every empirical claim tested on the study, judged together (`rules.adjudicate`)."""
    return adjudicate([fn(data) for fn in EMPIRICAL])
