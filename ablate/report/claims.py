"""The tutorial's claims as testable statements, each with its statistic, CI, N and verdict.

Verdict rule (fixed in advance, the same for every claim): "supported" when the 95% CI excludes 0
in the predicted direction *and* the test's p-value (where the claim has one) is below 0.05;
"contradicted" when both hold in the opposite direction; otherwise "inconclusive". A claim whose
arms or data the study lacks is "not tested", with the reason. With an exact sign-flip test, fewer
than 6 matched seeds can never reach p < 0.05 (the smallest two-sided p is 2/2^n): such a study
can only be inconclusive on a paired claim, and says so through its N.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ablate.report import measures as m
from ablate.report import stats
from ablate.report.load import StudyData

ALPHA = 0.05
CLIP_BINDS_MIN = 0.02  # issue 7: below ~2% of tokens at the upper clip, clip-higher cannot act
NO_SIGNAL_PASS_AT_G = 0.05  # base Pass@G below this: "no signal to amplify"
EQUIVALENCE = 0.02  # claim 5: template effects whose CIs all lie within ±0.02 count as none
SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTED, NOT_TESTABLE = "not tested", "not testable at this setting"
NAN = float("nan")


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    statistic: str
    value: float = NAN
    low: float = NAN
    high: float = NAN
    n: int = 0
    p_value: float = NAN
    verdict: str = NOT_TESTED
    arms: str = ""
    note: str = ""


def verdict(est: stats.Estimate, p_value: float | None, direction: int = 1) -> str:
    """The fixed rule above; `p_value=None` means the claim has only a CI."""
    side = est.excludes(0.0)
    significant = p_value is None or (np.isfinite(p_value) and p_value < ALPHA)
    if side == direction and significant:
        return SUPPORTED
    if side == -direction and significant:
        return CONTRADICTED
    return INCONCLUSIVE


def _claim(base: Claim, est: stats.Estimate, p: float | None, direction: int = 1, **kw) -> Claim:
    """`base` filled with an estimate and its verdict (`kw` overrides other fields)."""
    fields = {**base.__dict__, **kw, "value": est.value, "low": est.low, "high": est.high}
    fields.update(n=est.n, p_value=NAN if p is None else p, verdict=verdict(est, p, direction))
    return Claim(**fields)


# --- arms ------------------------------------------------------------------------------------
def _algo(data: StudyData) -> pd.DataFrame:
    cols = [c for c in data.trials.columns if c.startswith("algo.")]
    return data.trials.drop_duplicates("arm").set_index("arm")[cols]


def _closest_pair(data: StudyData, first: list[str], second: list[str]) -> tuple[str, str] | None:
    """The (a, b) pair differing in the fewest algorithm fields: the least confounded contrast."""
    algo = _algo(data).astype(str)
    pairs = [(a, b) for a in first for b in second if a != b]
    if not pairs:
        return None
    return min(pairs, key=lambda ab: int((algo.loc[ab[0]] != algo.loc[ab[1]]).sum()))


def _arms_where(data: StudyData, test: Callable[[pd.Series], bool]) -> list[str]:
    """Arms with at least one complete trial whose algorithm passes `test`."""
    done = set(data.complete()["arm"])
    return [arm for arm, row in _algo(data).iterrows() if arm in done and test(row)]


def main_cell(data: StudyData) -> tuple[str, str]:
    """The (model, template) with the most complete trials: where the arms are compared."""
    done = data.complete()
    if not len(done):
        first = data.trials.iloc[0]
        return first["model"], first["template"]
    return tuple(done.groupby(["model", "template"]).size().idxmax())


def _paired(data: StudyData, values: pd.Series, arm: str, ref: str) -> stats.Comparison:
    model, template = main_cell(data)
    a = m.by_seed(data, values, arm, model, template)
    b = m.by_seed(data, values, ref, model, template)
    return stats.paired_comparison(*m.matched(a, b))


# --- (1a) mechanism, no training -------------------------------------------------------------
def token_weights(loss_agg: str, norm: int | None, long: int, short: int) -> tuple[float, float]:
    """d(aggregated loss)/d(per-token loss) on a token of a long and of a short completion in
    one batch: the weight each aggregation gives a token of each length."""
    import torch

    from ablate.objective import AGGREGATIONS

    width = max(long, short)
    mask = torch.zeros(2, width)
    mask[0, :long], mask[1, :short] = 1.0, 1.0
    loss = torch.zeros(2, width, requires_grad=True)
    AGGREGATIONS.get(loss_agg)(loss, mask, norm).backward()
    return float(loss.grad[0, 0]), float(loss.grad[1, 0])


def claim_1a(data: StudyData) -> Claim:
    from ablate.presets import baseline

    budget = data.max_new_tokens or 80
    long, short = max(2, int(0.75 * budget)), max(1, int(0.375 * budget))
    ratios = {}
    for name in ("grpo", "dr_grpo"):
        algo = baseline(name).resolve(max_new_tokens=budget)
        w_long, w_short = token_weights(algo.loss_agg, algo.loss_norm_constant, long, short)
        ratios[name] = w_long / w_short
    return claim_1a_verdict(ratios["grpo"], ratios["dr_grpo"], long, short)


def claim_1a_verdict(grpo_ratio: float, dr_ratio: float, long: int, short: int) -> Claim:
    """Exact arithmetic, so never inconclusive: GRPO must weight a long token less (ratio < 1)
    and Dr. GRPO equally (ratio = 1)."""
    ok = grpo_ratio < 1 - 1e-9 and abs(dr_ratio - 1) < 1e-9
    return Claim(
        id="1a",
        statement="GRPO's 1/|o| gives each token of a long incorrect completion less weight than "
        "a short one's (long wrong answers are penalised less per token); Dr. GRPO's constant "
        "does not",
        statistic=f"per-token weight ratio long/short ({long} vs {short} tokens), GRPO",
        value=grpo_ratio,
        low=grpo_ratio,
        high=grpo_ratio,
        verdict=SUPPORTED if ok else CONTRADICTED,
        arms="presets grpo, dr_grpo (computed from the loss, no training)",
        note=f"Dr. GRPO ratio {dr_ratio:.3f}",
    )


# --- (1b) observed length growth of incorrect answers ----------------------------------------
def claim_1b(data: StudyData) -> Claim:
    base = Claim(
        id="1b",
        statement="with std scaling and per-sequence length normalisation (GRPO), incorrect "
        "answers grow longer over training than under Dr. GRPO",
        statistic="paired Δ (GRPO − Dr. GRPO) of the growth of incorrect-answer length "
        "(last − first quarter of training, tokens)",
    )
    grpo = _arms_where(
        data,
        lambda a: a["algo.scale"] == "group_std" and a["algo.loss_agg"] == "seq_mean_token_mean",
    )
    dr = _arms_where(
        data,
        lambda a: a["algo.scale"] == "none" and a["algo.loss_agg"] == "seq_mean_token_sum_norm",
    )
    pair = _closest_pair(data, grpo, dr)
    if pair is None:
        return Claim(**{**base.__dict__, "note": "needs a GRPO-like and a Dr. GRPO-like arm"})
    growth = m.trend(data.history, "length/incorrect_mean")
    cmp = _paired(data, growth, *pair)
    return _claim(base, cmp.diff, cmp.p_value, arms=f"{pair[0]} vs {pair[1]}")


# --- (2) clip-higher and entropy --------------------------------------------------------------
def claim_2(data: StudyData) -> Claim:
    base = Claim(
        id="2",
        statement="clip-higher keeps token entropy higher than symmetric clipping",
        statistic="paired Δ (clip-higher − symmetric) of mean token entropy, last quarter",
    )
    # token-level ratios only: GSPO's sequence-ratio clip range is a different quantity
    token = lambda a: a["algo.ratio_level"] == "token"  # noqa: E731
    high = _arms_where(data, lambda a: token(a) and a["algo.clip_high"] > a["algo.clip_low"])
    sym = _arms_where(data, lambda a: token(a) and a["algo.clip_high"] == a["algo.clip_low"])
    pair = _closest_pair(data, high, sym)
    if pair is None:
        return Claim(**{**base.__dict__, "note": "needs a clip-higher and a symmetric-clip arm"})
    arms = f"{pair[0]} vs {pair[1]}"
    model, template = main_cell(data)
    clip = m.window_mean(data.history, "policy/clip_frac_high", 0.0, 1.0)
    binds = float(np.nanmean(m.by_seed(data, clip, pair[1], model, template)))
    note = f"upper clip binds on {binds:.2%} of tokens in {pair[1]}"
    if not np.isfinite(binds) or binds < CLIP_BINDS_MIN:
        return Claim(**{**base.__dict__, "verdict": NOT_TESTABLE, "arms": arms, "note": note})
    entropy = m.window_mean(data.history, "entropy/mean", 0.75, 1.0)
    cmp = _paired(data, entropy, *pair)
    return _claim(base, cmp.diff, cmp.p_value, arms=arms, note=note)


# --- (3) token vs sequence ratio variance against length --------------------------------------
def _rho(frame: pd.DataFrame, x: str, y: str) -> float:
    pts = frame[[x, y]].dropna()
    if len(pts) < 3 or np.ptp(pts[x]) == 0 or np.ptp(pts[y]) == 0:
        return NAN
    return float(pts[x].rank().corr(pts[y].rank()))


def claim_3(data: StudyData) -> Claim:
    base = Claim(
        id="3",
        statement="token-ratio variance grows with completion length; the sequence ratio's "
        "does not",
        statistic="mean over trials of Spearman ρ(length, token-ratio var) − ρ(length, "
        "sequence-ratio var) across training steps",
        arms="all complete trials",
    )
    keys = ["length/mean", "policy/ratio_var", "policy/seq_ratio_var"]
    h = data.history[data.history["metric"].isin(keys)]
    h = h[h["trial_id"].isin(data.complete()["trial_id"])]
    wide = h.pivot_table(index=["trial_id", "step"], columns="metric", values="value")
    if not set(keys) <= set(wide.columns):
        return Claim(**{**base.__dict__, "note": "ratio variances were not logged"})
    diffs = []
    for _, one in wide.groupby(level="trial_id"):
        tok, seq = _rho(one, keys[0], keys[1]), _rho(one, keys[0], keys[2])
        if np.isfinite(tok):
            diffs.append(tok - (seq if np.isfinite(seq) else 0.0))
    if not diffs:
        note = "ratios constant (on-policy updates: the ratio is 1, its variance 0)"
        return Claim(**{**base.__dict__, "verdict": NOT_TESTABLE, "note": note})
    est = stats.interval_estimate(np.asarray(diffs))
    return _claim(base, est, stats.sign_flip_p_value(np.asarray(diffs)))


# --- (4) RL gain vs base Pass@G, (6) pass@1 vs pass@k gains -----------------------------------
def base_value(data: StudyData, k: int) -> pd.Series:
    """trial_id -> base pass@k: the trial's own step-0 eval when it has one, else passk.csv."""
    first = data.history[data.history["metric"] == f"eval/pass_at_{k}"]
    first = first[first["step"] == 0].set_index("trial_id")["value"]
    out = pd.Series(NAN, index=data.trials["trial_id"].to_numpy())
    out.loc[first.index.intersection(out.index)] = first
    p = data.passk
    if len(p):
        p = p[p["k"] == k].set_index(["model", "template"])["pass_at_k"]
        for _, t in data.trials.iterrows():
            if np.isnan(out[t["trial_id"]]) and (t["model"], t["template"]) in p.index:
                out[t["trial_id"]] = p[(t["model"], t["template"])]
    return out


def base_pass_at_g(data: StudyData) -> pd.Series:
    """trial_id -> base Pass@G, passk.csv (the Pass@G phase) first, else step-0 eval."""
    g, out = data.group_size, pd.Series(NAN, index=data.trials["trial_id"].to_numpy())
    p = data.passk
    if len(p) and g in set(p["k"]):
        table = p[p["k"] == g].set_index(["model", "template"])["pass_at_k"]
        for _, t in data.trials.iterrows():
            out[t["trial_id"]] = table.get((t["model"], t["template"]), NAN)
    return out.fillna(base_value(data, g)) if g else out


def gains(data: StudyData, k: int) -> pd.Series:
    """trial_id -> final eval pass@k − base pass@k (complete trials)."""
    final = m.final_value(data.history, f"eval/pass_at_{k}")
    ids = data.complete()["trial_id"]
    return (final.reindex(ids) - base_value(data, k).reindex(ids)).dropna()


def claim_4(data: StudyData) -> Claim:
    base = Claim(
        id="4",
        statement="RL gain is ~0 where base Pass@G is ~0 and grows with base Pass@G",
        statistic="Spearman ρ(base Pass@G, pass@1 gain) over trials of one arm",
    )
    done = data.complete()
    per_arm = done.groupby("arm")["model"].nunique()
    if not len(per_arm) or per_arm.max() < 3:
        return Claim(**{**base.__dict__, "note": "needs one arm trained from >= 3 base models"})
    arm = data.reference_arm if per_arm.get(data.reference_arm, 0) >= 3 else per_arm.idxmax()
    ids = done[done["arm"] == arm]["trial_id"]
    gain, pg = gains(data, 1).reindex(ids), base_pass_at_g(data).reindex(ids)
    est = stats.rank_correlation(pg.to_numpy(), gain.to_numpy())
    zero = gain[pg < NO_SIGNAL_PASS_AT_G]
    note = (
        f"mean gain where Pass@G < {NO_SIGNAL_PASS_AT_G}: {zero.mean():+.3f} (N={len(zero)})"
        if len(zero)
        else "no base model without signal"
    )
    return _claim(base, est, None, arms=arm, note=note)


def claim_6(data: StudyData) -> Claim:
    ks = [k for k in m.eval_ks(data.history) if k > 1]
    base = Claim(
        id="6",
        statement="RL raises pass@1 more than pass@k at large k",
        statistic=f"mean over trials of gain(pass@1) − gain(pass@{max(ks) if ks else 'k'})",
    )
    if not ks:
        return Claim(**{**base.__dict__, "note": "eval logged no pass@k with k > 1"})
    model, template = main_cell(data)
    done = data.complete()
    ids = done[(done["model"] == model) & (done["template"] == template)]["trial_id"]
    d = (gains(data, 1) - gains(data, max(ks))).reindex(ids).dropna().to_numpy()
    if not len(d):
        return Claim(**{**base.__dict__, "note": "no base pass@k (no step-0 eval, no passk.csv)"})
    est = stats.interval_estimate(d)
    return _claim(base, est, stats.sign_flip_p_value(d), arms=f"all arms on {model}/{template}")


# --- (5) template sensitivity of base Pass@k --------------------------------------------------
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
        out["p_holm"] = stats.holm(out["p"].to_numpy())
    return out


def claim_5(data: StudyData) -> Claim:
    base = Claim(
        id="5",
        statement="the prompt template changes base Pass@k",
        statistic="largest |Δ pass@1| between templates of one base model (Holm-adjusted p)",
        arms="Pass@G phase (no training)",
    )
    contrasts = template_contrasts(data.passk) if len(data.passk) else pd.DataFrame()
    if not len(contrasts):
        return Claim(**{**base.__dict__, "note": "needs Pass@k of >= 2 templates per model"})
    top = contrasts.loc[contrasts["p_holm"].idxmin()]
    est = stats.Estimate(top["diff"], top["low"], top["high"], int(top["n"]))
    side = est.excludes(0.0) or 1  # a change in either direction supports the claim
    note = f"{top['model']}: {top['template']} vs {top['ref']} ({len(contrasts)} contrasts)"
    claim = _claim(base, est, float(top["p_holm"]), side, note=note)
    within = (contrasts["low"] > -EQUIVALENCE) & (contrasts["high"] < EQUIVALENCE)
    if claim.verdict == INCONCLUSIVE and within.all():  # every CI inside the margin: no effect
        return Claim(**{**claim.__dict__, "verdict": CONTRADICTED})
    return claim


CLAIMS = (claim_1a, claim_1b, claim_2, claim_3, claim_4, claim_5, claim_6)


def evaluate_claims(data: StudyData) -> pd.DataFrame:
    return pd.DataFrame([fn(data).__dict__ for fn in CLAIMS])
