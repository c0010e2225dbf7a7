"""The report's opening: what was found, in sentences a reader could quote, then every caveat
(confounds, survivorship, A/A calibration) that qualifies them."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from ablate.factors import confounds
from ablate.report.claims.rules import CONTRADICTED, DECIDED, EQUIVALENT, Claim, verdict_text
from ablate.report.data import numbers
from ablate.report.data.load import StudyData
from ablate.report.stats import contrasts as cx
from ablate.report.stats import controls as ctl
from ablate.report.stats import inference
from ablate.report.stats import measures as m
from ablate.report.stats import outcomes as oc

TOKEN_RATIO_FLAG = 1.1  # an arm generating >10% more tokens per step than the reference


def _f(x: float) -> str:
    return numbers.num(x, sign=True)


def _est(e: inference.Estimate) -> str:
    """The estimate and its interval, decimals by the interval's width (`numbers`)."""
    return numbers.estimate(e.value, e.low, e.high, sign=True)


def _p(p: float) -> str:
    text = numbers.p_value(p)
    return f"p {text}" if text.startswith("<") else f"p = {text}"


def _reading(r: cx.ContrastRow) -> str:
    """A contrast's verdict in a few words (significance where there is no verdict)."""
    if r.verdict:
        return str(r.verdict)
    return "significant" if r.significant else "not significant"


def contrast_sentence(r: cx.ContrastRow) -> str:
    c, where = r.contrast, f"{r.arm} vs {r.reference} ({r.cell}, {r.kind})"
    d = c.diff
    if r.verdict == cx.NOT_TESTABLE:  # `took_effect.inert_verdicts`: the factor barely ran
        return (
            f"{where}: Δ pass@1 = {_f(d.value)} — {cx.NOT_TESTABLE}: {r.note}, under "
            f"{cx.took_effect.INERT_SHARE:.0%} (see 'Did each factor take effect?')."
        )
    if r.n < inference.MIN_SEEDS:
        return (
            f"{where}: Δ pass@1 = {_f(d.value)} over n={r.n} seeds: too few seeds for an "
            f"interval or a test (needs {inference.MIN_SEEDS})."
        )
    about = f"{r.n} seeds × {r.problems} problems" if r.reading == cx.TASK else f"{r.n} seeds"
    if not math.isfinite(c.p_value):  # zero variance: no test at all (`inference.no_variance`)
        return (
            f"{where}: Δ pass@1 = {_f(d.value)} ({about}): the difference is the same in every "
            "seed and problem, no variance: no p-value."
        )
    head = f"{where}: Δ pass@1 = {_est(d)} ({about}), Holm {_p(r.p_holm)}"
    if r.note.startswith("look "):  # `contrasts.sequential_verdicts`: the design decides
        head += f"; verdict of the sequential design at {r.note}, not of this fixed-design p"
    if r.verdict == cx.DIFFERENT and cx.crossed.equivalent(*r.interval90, r.margin):
        return f"{head} — different, but small: its 90% interval lies inside ±{r.margin:g}."
    if r.verdict == cx.DIFFERENT:
        return f"{head} — different."
    if r.verdict == cx.EQUIVALENT:
        return f"{head} — equivalent within ±{r.margin:g} (90% interval inside the margin)."
    return (
        f"{head} — inconclusive: this design detects |Δ| ≥ {numbers.num(abs(r.mde))} with 80% power"
        + (f", and cannot yet rule out ±{r.margin:g}." if r.margin else ".")
    )


def _changed(r: cx.ContrastRow, t: cx.ContrastRow) -> bool:
    """Whether the secondary reading `t` changes the verdict of `r`: its significance, or its
    verdict where both readings have one (equivalent → inconclusive counts)."""
    verdicts = r.verdict in _VERDICTS and t.verdict in _VERDICTS and r.verdict != t.verdict
    return verdicts or r.significant != t.significant


def _token_disagreements(steps: list[cx.ContrastRow], tokens: list[cx.ContrastRow]) -> list[str]:
    """Each contrast whose verdict the other reading (equal steps / equal tokens) changes, in
    either direction."""
    at_tokens = {(r.arm, r.model, r.template): r for r in tokens}
    out = []
    for r in steps:
        t = at_tokens.get((r.arm, r.model, r.template))
        if t is None or not _changed(r, t):
            continue
        mark = f" ({numbers.integer(t.tokens)})" if math.isfinite(t.tokens) else ""
        out.append(
            f"{r.arm} vs {r.reference} ({r.cell}) is {_reading(r)} at equal steps but "
            f"{_reading(t)} at equal generated tokens{mark}: Δ = {_est(t.contrast.diff)}, "
            f"Holm {_p(t.p_holm)}."
        )
    return out


def confound_caveats(data: StudyData) -> list[str]:
    ref_name = data.reference_arm
    ref = data.algorithm(ref_name)
    per_step = m.tokens_per_step(data)
    ref_tokens = per_step.reindex(data.trials[data.trials["arm"] == ref_name]["trial_id"]).mean()
    out = []
    for arm in data.compared_arms:
        if arm == ref_name:
            continue
        algo = data.algorithm(arm)
        diff = confounds.differing_fields(algo, ref)
        groups = []
        if set(confounds.SCHEDULE_FIELDS) & set(diff):
            groups.append(
                f"its update schedule ({confounds.schedule(algo)} vs {confounds.schedule(ref)})"
            )
        if set(confounds.KL_FIELDS) & set(diff):
            groups.append(
                f"its KL term ({confounds.kl_setting(algo)} vs {confounds.kl_setting(ref)})"
            )
        if groups:
            out.append(
                f"{arm} differs from {ref_name} in {' and '.join(groups)}: its contrast "
                "measures that too."
            )
        if len(diff) > 1:
            out.append(
                f"{arm} differs from {ref_name} in {len(diff)} fields ({', '.join(diff)}): its "
                "contrast cannot say which of them matters."
            )
        mine = per_step.reindex(data.trials[data.trials["arm"] == arm]["trial_id"]).mean()
        if ref_tokens > 0 and mine / ref_tokens > TOKEN_RATIO_FLAG:
            out.append(
                f"{arm} generated {mine / ref_tokens:.2f}× the tokens per step of {ref_name}: "
                "read its contrast at equal generated tokens too."
            )
    return out


def survival_caveats(data: StudyData) -> list[str]:
    out = []
    t = data.trials
    classes = oc.outcome_class(t) if len(t) else None
    for arm, rows in t.groupby("arm", sort=False):
        ended = classes.reindex(rows["trial_id"].to_numpy())
        diverged = rows[rows["outcome"] == "diverged"]
        saturated = int((ended == oc.SATURATED).sum())
        failed = int((ended == oc.FAILED).sum())
        missing = int((ended == oc.PENDING).sum())
        if len(diverged):
            steps = ", ".join(str(int(s)) for s in diverged["diverged_step"].dropna())
            out.append(
                f"{len(diverged)} of {len(rows)} {arm} trials diverged"
                + (f" (at step {steps})" if steps else "")
                + "; the headline reads divergence as its own outcome (Δ among the seeds where "
                "both arms survived, beside the divergence rates and their exact test)."
            )
        if saturated:
            out.append(
                f"{saturated} of {len(rows)} {arm} trials saturated (dynamic sampling could not "
                "fill a batch): the algorithm's outcome, not a failure; they stopped before "
                "their final eval and are counted in the 'outcomes' table, not the headline."
            )
        if failed or missing:
            out.append(
                f"{arm}: {failed} failed and {missing} missing/unfinished of "
                f"{len(rows)} planned trials are left out of every statistic (see 'incomplete')."
            )
    return out


def control_sentences(
    rows: list[cx.ContrastRow], declared: Mapping[str, float] | None = None
) -> list[str]:
    """The A/A checks and the positive and graded controls, in one sentence each (`declared`:
    the controls' declared effects, by arm)."""
    out = []
    for r in rows:
        if r.kind == cx.GRADED:
            power = ctl.control_power(r, (declared or {}).get(r.arm))
            stat = f"Δ = {_est(r.contrast.diff)}"
            out.append(
                f"Graded control {r.arm} vs {r.reference} ({r.cell}): {stat}, "
                f"{ctl.check(r, power)}."
            )
            continue
        d, kind = r.contrast.diff, "A/A check" if r.kind == cx.AA else "Positive control"
        if r.n < inference.MIN_SEEDS:
            out.append(f"{kind} {r.arm} vs {r.reference}: too few seeds (n={r.n}).")
            continue
        stat = f"Δ = {_est(d)}, Holm {_p(r.p_holm)} over {r.n} seeds"
        if r.kind == cx.AA and r.significant:
            out.append(
                f"CALIBRATION FAILURE: the A/A replicates {r.arm} and {r.reference} differ "
                f"({stat}); the report's error rates cannot be trusted for this study."
            )
        elif r.kind == cx.AA:
            out.append(f"A/A check passed: {r.arm} vs {r.reference} ({r.cell}) {stat}.")
        elif r.significant:
            out.append(
                f"Positive control detected: {r.arm} vs {r.reference} ({r.cell}) {stat}: the "
                "study can detect an effect of this size."
            )
        else:
            out.append(
                f"UNDERPOWERED: the positive control {r.arm} vs {r.reference} ({r.cell}) was not "
                f"detected ({stat}); an inconclusive contrast here says little."
            )
    return out


aa_sentences = control_sentences  # the A/A rows alone read the same


def _decided_by(c: Claim) -> str:
    """The test that decided a claim, in words, with its numbers."""
    delta = "±" + f"{c.margin:g}" if c.margin is not None else "0"
    if c.verdict == EQUIVALENT:
        return f"its 90% interval [{_f(c.low90)}, {_f(c.high90)}] lies inside ±{c.margin:g}"
    if c.verdict == CONTRADICTED:
        held = f"Holm {_p(c.p_holm)}, " if math.isfinite(c.p_holm) else ""
        return f"{held}its 95% interval lies beyond {delta} against the claim{_exact(c)}"
    return f"Holm {_p(c.p_holm)}{_exact(c)}"


def _exact(c: Claim) -> str:
    """The exact sign-flip test's Holm p beside the t's, where it was required."""
    return f", exact sign-flip {_p(c.p_exact_holm)} (Holm)" if math.isfinite(c.p_exact_holm) else ""


def claim_sentences(claims: list[Claim]) -> list[str]:
    return [
        f"Claim {c.id} ({c.statement}) is {verdict_text(c)}: Δ = "
        f"{numbers.estimate(c.value, c.low, c.high, sign=True)}, N = {int(c.n)}, {_decided_by(c)}."
        if math.isfinite(c.low)
        else f"Claim {c.id} ({c.statement}) is {verdict_text(c)} ({_decided_by(c)}, "
        f"N = {int(c.n)})."
        for c in claims
        if c.verdict in DECIDED
    ]


def finding_sentences(claims: list[Claim]) -> list[str]:
    """A reproduction's findings that were decided (supported, equivalent within the margin,
    contradicted), with the interval and the test that decided them."""
    return [
        f"{c.id} ({c.statement}) is {verdict_text(c)}: Δ = "
        f"{numbers.estimate(c.value, c.low, c.high, sign=True)} over {c.n} seeds, {_decided_by(c)}."
        for c in claims
        if c.verdict in DECIDED
    ]


def findings(
    data: StudyData,
    steps: list[cx.ContrastRow],
    tokens: list[cx.ContrastRow],
    aa: list[cx.ContrastRow],
    claims: list[Claim],
) -> dict[str, list[str]]:
    """The verdicts' sections of sentences, in reading order; empty sections are dropped by the
    caller. `steps` and `tokens` are the two families; the study's primary one leads. The
    caveats that qualify them are `caveats`, which the report places (after every finding)."""
    primary = tokens if data.primary == cx.TOKENS else steps
    by = {v: [contrast_sentence(r) for r in primary if r.verdict == v] for v in _VERDICTS}
    untestable = [contrast_sentence(r) for r in primary if r.verdict not in _VERDICTS]
    margin = f"±{data.margin:g}" if data.margin else "no margin declared"
    return {
        f"Different (primary: {primary[0].kind if primary else data.primary}, Holm)": by[
            cx.DIFFERENT
        ]
        or ["No contrast is different after Holm."],
        f"Equivalent within {margin}": by[cx.EQUIVALENT],
        "Inconclusive or not testable": by[cx.INCONCLUSIVE] + untestable,
        "Controls": control_sentences(
            [*aa, *cx.control_contrasts(data), *cx.graded_contrasts(data)], data.control_effects
        ),
        "At equal generated tokens" if primary is steps else "At equal steps": (
            _token_disagreements(steps, tokens)
        ),
        "Claims": claim_sentences(claims),
    }


def verifier_caveats(history: pd.DataFrame) -> list[str]:
    """Per arm, the trials whose verifier failed or timed out on some sample (scored 0 and
    counted, never as a wrong answer): those rewards are not the model's alone."""
    train_metric, eval_metric = VERIFIER_ERROR_METRICS
    by_trial = ["arm", "trial_id"]
    # training's count runs over the trial (its last value); each eval counts its own samples
    train = history[history["metric"] == train_metric].sort_values("step")
    evals = history[history["metric"] == eval_metric]
    counts = pd.concat(
        {
            "train": train.groupby(by_trial, sort=False)["value"].last(),
            "eval": evals.groupby(by_trial, sort=False)["value"].sum(),
        },
        axis=1,
    ).fillna(0.0)
    out = []
    for arm, rows in counts.groupby(level="arm", sort=False):
        hit = rows[(rows > 0).any(axis=1)]
        if len(hit):
            out.append(
                f"{len(hit)} of {len(rows)} {arm} trials had verifier errors or timeouts "
                f"({int(hit['train'].sum()):,} training and {int(hit['eval'].sum()):,} eval "
                f"samples, scored 0 and counted in {train_metric} and {eval_metric}): those "
                "rewards are not the model's alone."
            )
    return out


def caveats(data: StudyData) -> list[str]:
    """What qualifies the findings: the arms' confounds, their inert factors, survivorship,
    then verifier errors."""
    inert = cx.took_effect.partly_inert_sentences(data)
    verifier = verifier_caveats(data.history) if len(data.history) else []
    return confound_caveats(data) + inert + survival_caveats(data) + verifier


#: The verifier error counts a trial logs: training's running count, then each eval's.
VERIFIER_ERROR_METRICS = ("budget/verifier_errors", "eval/verifier_errors")
_VERDICTS = (cx.DIFFERENT, cx.EQUIVALENT, cx.INCONCLUSIVE)
