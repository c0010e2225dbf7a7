"""Tables behind the headline: further measures, training dynamics, base models and templates.
Every measure is defined in its table's caption."""

from __future__ import annotations

import pandas as pd

from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.render.headline import UNIT, seed_estimate, seeds_text
from ablate.report.stats import inference
from ablate.report.stats import measures as m
from ablate.report.stats import outcomes as oc
from ablate.report.stats.template_contrasts import template_contrasts


def measures_table(data: StudyData) -> Table:
    """pass@k at the largest k, inference cost and sample efficiency per arm × cell."""
    ks = [k for k in m.eval_ks(data.history) if k > 1]
    big = max(ks) if ks else None
    h = data.history
    pass_k = m.headline(data, m.final_value(h, f"eval/pass_at_{big}")) if big else None
    cost = m.final_value(h, "eval/tokens_per_correct")
    efficiency = m.gain_per_million_tokens(data)
    tokens = m.final_value(h, "budget/generated_tokens") / 1e6
    rows = []
    for cell in m.cells(data):
        row = {"arm": cell[0], "base · template": f"{cell[1]} · {cell[2]}"}
        row["seeds"] = seeds_text(data, cell)
        if pass_k is not None:
            row[f"pass@{big}"] = seed_estimate(data, pass_k, cell, headline=True, bounds=UNIT)
        row["eval tokens / correct"] = seed_estimate(data, cost, cell)
        row["Δpass@1 / M gen. tokens"] = seed_estimate(data, efficiency, cell)
        row["gen. tokens (M)"] = seed_estimate(data, tokens, cell)
        rows.append(row)
    caption = (
        "Further final measures, mean over seeds [95% t interval]. "
        + (f"pass@{big}: unbiased pass@{big} of the final eval (diverged = 0). " if big else "")
        + "eval tokens / correct: tokens generated in the final eval per correct answer "
        "(inference cost; lower is cheaper, not better). Δpass@1 / M gen. tokens: final minus "
        "step-0 eval pass@1 per million tokens generated in training, dynamic sampling's "
        "discarded samples included (sample efficiency). gen. tokens (M): millions of tokens "
        "generated in training. Finished trials only, except pass@k."
    )
    return Table(caption, rows, compact=True)


def outcomes_table(data: StudyData) -> Table:
    """Divergence, saturation and failure rates of each arm against the reference's, with
    their exact contrasts (`stats.outcomes`)."""
    rows = []
    for r in oc.outcome_contrasts(data):
        row = {"arm": r.arm, "base · template": f"{r.model} · {r.template}", "outcome": r.outcome}
        row |= {"arm k/n": f"{r.k}/{r.n}", "rate [95% exact]": r.rate}
        row |= {"reference k/n": f"{r.ref_k}/{r.ref_n}", "reference rate": r.ref_rate}
        row |= {"Δ rate": r.diff, "p (Boschloo)": r.p_value, "p (Holm)": r.p_holm}
        rows.append(row)
    caption = (
        "How trials ended, per arm against the reference arm in each base · template cell: k of"
        " n trials, the rate with its exact (Clopper–Pearson) 95% interval, Boschloo's exact "
        "test on the 2×2 counts (exact at any count, and it needs no pairing by seed), Holm "
        "over the table; – : no test (no event in either arm). diverged: a non-finite loss or "
        "weight; the headline compares its rate beside Δ among survivors. saturated: the "
        "algorithm's data filter ran out of informative groups (dynamic sampling could not fill"
        " a batch, or No-Positive-Resampling retired every prompt): the algorithm's outcome, "
        "not a failure; these trials stopped before their final eval, so the headline leaves "
        "them out and they are counted here only. Divergence and saturation rates are over the "
        "trials with an algorithm outcome (finished, diverged, saturated); failed (the "
        "harness's outcome: an infrastructure or data error, a killed run) over every ended "
        "trial; missing and unfinished trials count nowhere."
    )
    return Table(caption, rows)


def survivors_table(data: StudyData) -> Table:
    """pass@1 among surviving seeds (the headline's) beside the diverged-as-zero (hurdle) one."""
    final = m.final_value(data.history, "eval/pass_at_1")
    headline_values = m.headline(data, final)
    rows = []
    for cell in m.cells(data):
        classes = oc.outcome_class(
            data.trials[
                (data.trials["arm"] == cell[0])
                & (data.trials["model"] == cell[1])
                & (data.trials["template"] == cell[2])
            ]
        )
        row = {"arm": cell[0], "base · template": f"{cell[1]} · {cell[2]}"}
        row["finished"] = int((classes == oc.FINISHED).sum())
        row["diverged"] = int((classes == oc.DIVERGED).sum())
        row["saturated"] = int((classes == oc.SATURATED).sum())
        row["pass@1, diverged = 0"] = seed_estimate(
            data, headline_values, cell, headline=True, bounds=UNIT
        )
        row["pass@1, finished only"] = seed_estimate(data, final, cell, bounds=UNIT)
        rows.append(row)
    caption = (
        "Final pass@1 two ways, mean over seeds [95% t interval]: with each diverged trial as "
        "0 (the hurdle reading, (1 − q)·μ), and among the trials that finished (survivors, μ: "
        "the headline's reading, beside its divergence columns). The survivors' mean is "
        "conditional on surviving: an arm that diverges on its hardest seeds looks better there "
        "than it is; read it beside the divergence rate (table 'outcomes'). Saturated trials "
        "stopped before their final eval and are in neither."
    )
    return Table(caption, rows)


def has_lost_trials(data: StudyData) -> bool:
    """Whether any trial diverged or saturated (else the two pass@1 readings agree)."""
    classes = oc.outcome_class(data.trials) if len(data.trials) else pd.Series(dtype=object)
    return bool(classes.isin([oc.DIVERGED, oc.SATURATED]).any())


DYNAMICS = {
    "len. correct (eval)": ("eval/length_correct", "final"),
    "len. incorrect (eval)": ("eval/length_incorrect", "final"),
    "Δ len. incorrect (train)": ("length/incorrect_mean", "trend"),
    "entropy (last ¼)": ("entropy/mean", "last"),
    "Δ entropy": ("entropy/mean", "trend"),
    "KL to ref": ("policy/kl_ref", "last"),
    "clip frac low": ("policy/clip_frac_low", "all"),
    "clip frac high": ("policy/clip_frac_high", "all"),
    "token-ratio var": ("policy/ratio_var", "all"),
    "seq-ratio var": ("policy/seq_ratio_var", "all"),
    "extra gen. batches": ("budget/extra_gen_batches", "final"),
    "step s": ("perf/step_seconds", "all"),
    # PPO's critic: what it adds in time per step and in parameters (absent for group arms)
    "critic s/step": ("perf/critic_seconds", "all"),
    "critic params": ("budget/critic_params", "final"),
}


def _summary(data: StudyData, metric: str, how: str) -> pd.Series:
    h = data.history
    if how == "final":
        return m.final_value(h, metric)
    if how == "trend":
        return m.trend(h, metric)
    return m.window_mean(h, metric, 0.75 if how == "last" else 0.0, 1.0)


def dynamics_table(data: StudyData) -> Table:
    present = set(data.history["metric"].unique())
    columns = {k: v for k, v in DYNAMICS.items() if v[0] in present}
    summaries = {k: _summary(data, *v) for k, v in columns.items()}
    rows = []
    for cell in m.cells(data):
        row = {"arm": cell[0], "base · template": f"{cell[1]} · {cell[2]}"}
        row["seeds"] = int(m.by_seed(data, pd.Series(dtype=float), *cell).size)
        for name, values in summaries.items():
            row[name] = seed_estimate(data, values, cell)
        rows.append(row)
    caption = (
        "Training dynamics of finished trials, mean over seeds [95% t interval]. Training "
        "metrics are over every sample generated in a step (before dynamic sampling's filter). "
        "Δ = mean of the last quarter of training minus the first quarter; 'last ¼' = mean of the "
        "last quarter; 'all' columns (clip fractions, ratio variances, step s) = mean over all "
        "steps; len. = tokens per completion."
    )
    return Table(caption, rows, compact=True)


def base_table(data: StudyData) -> Table:
    """Base Pass@k per model × template with the signal fraction (pass@G − pass^G)."""
    rows = []
    p = data.passk
    for _, r in p.iterrows() if len(p) else []:
        row = dict(model=r["model"], template=r["template"], k=int(r["k"]))
        row["problems"] = int(r["n_problems"])
        row["pass@k"] = inference.Estimate(
            r["pass_at_k"], r["ci_low"], r["ci_high"], int(r["n_problems"])
        )
        row["pass^k"] = float(r["pass_hat_k"])
        # pass@k − pass^k: at k = 1 a difference of equal numbers, so round off float noise
        row["signal"] = round(float(r["signal_fraction"]), 12) + 0.0  # and -0.0 to 0.0
        row["flag"] = "no signal to amplify" if r["signal_fraction"] < 0.05 and r["k"] > 1 else ""
        rows.append(row)
    caption = (
        "Base models before RL: pass@k [95% CI over problems] (the problem is the unit: no "
        "training, no seeds); pass^k = all k correct; signal = pass@k − pass^k, the share of "
        "groups of k with unequal rewards (what GRPO can learn from)."
    )
    return Table(caption, rows)


def _template_contrasts(data: StudyData) -> pd.DataFrame:
    return template_contrasts(data.passk) if len(data.passk) else pd.DataFrame()


def has_template_contrasts(data: StudyData) -> bool:
    return bool(len(_template_contrasts(data)))


def templates_table(data: StudyData) -> Table:
    """Each template's base pass@1 against the model's first template (the Pass@G phase)."""
    rows = _template_contrasts(data).to_dict("records")
    caption = (
        "Template contrasts of base pass@1: each template against the model's first, Δ with a "
        "normal 95% CI over problems, p Holm-adjusted across rows."
    )
    return Table(caption, rows)


TABLES = (
    TableSpec(name="measures", build=measures_table),
    TableSpec(name="outcomes", build=outcomes_table),
    TableSpec(name="survivors", build=survivors_table, applies=has_lost_trials),
    TableSpec(name="dynamics", build=dynamics_table),
    TableSpec(name="base", build=base_table),
    TableSpec(name="templates", build=templates_table, applies=has_template_contrasts),
)
