"""The report's tables, built once as rows of `Estimate`s and plain values, then written as
Markdown, LaTeX (booktabs: mean ± CI half-width, best in bold, significance marks in a footnote)
and CSV (every estimate as value, low, high, n)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ablate.report import measures as m
from ablate.report import stats
from ablate.report.load import StudyData

MARKS = {
    "*": "paired sign-flip test over matched seeds, Holm-adjusted p < 0.05",
    "†": "per-problem Wilcoxon signed-rank test on the final eval, p < 0.05",
}


@dataclass
class Table:
    name: str
    caption: str
    rows: list[dict]
    higher_is_better: set[str] = field(default_factory=set)
    marks: dict[str, str] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return list(self.rows[0]) if self.rows else []


# --- building --------------------------------------------------------------------------------
def _cell_estimate(
    data: StudyData, values: pd.Series, cell: tuple[str, str, str]
) -> stats.Estimate:
    return stats.interval_estimate(m.by_seed(data, values, *cell).dropna().to_numpy())


def at_equal_tokens(data: StudyData, model: str, template: str) -> pd.Series:
    """trial_id -> eval pass@1 interpolated at the smallest final generated-token count of the
    cell's complete trials: every arm judged at the same generation compute."""
    acc, tok = (
        m.curve(data.history, "eval/pass_at_1"),
        m.curve(data.history, "eval/budget_generated_tokens"),
    )
    done = data.complete()
    ids = done[(done["model"] == model) & (done["template"] == template)]["trial_id"]
    joined = acc.merge(tok, on=["trial_id", "step"], suffixes=("", "_tok"))
    joined = joined[joined["trial_id"].isin(ids)]
    if not len(joined):
        return pd.Series(dtype=float)
    budget = joined.groupby("trial_id")["value_tok"].max().min()
    return joined.groupby("trial_id")[["value_tok", "value"]].apply(
        lambda g: float(np.interp(budget, g["value_tok"], g["value"]))
    )


def _contrast(data: StudyData, cell: tuple[str, str, str], values: pd.Series) -> dict:
    arm, model, template = cell
    ref = m.by_seed(data, values, data.reference_arm, model, template)
    mine = m.by_seed(data, values, arm, model, template)
    if arm == data.reference_arm or not len(ref.dropna()):
        return {"Δ pass@1 vs ref": None, "p": np.nan, "p per-problem": np.nan, "P(improve)": np.nan}
    a, r = m.matched(mine, ref)
    cmp = stats.paired_comparison(a, r)
    seeds = sorted(set(mine.dropna().index) & set(ref.dropna().index))
    pa = m.per_problem_accuracy(data, arm, model, template, seeds)
    pr = m.per_problem_accuracy(data, data.reference_arm, model, template, seeds)
    common = pa.index.intersection(pr.index)
    pp = (
        stats.per_problem_test(pa[common].to_numpy(), pr[common].to_numpy()).p_value
        if len(common)
        else np.nan
    )
    poi = stats.probability_of_improvement(mine.dropna().to_numpy(), ref.dropna().to_numpy())
    return {"Δ pass@1 vs ref": cmp.diff, "p": cmp.p_value, "p per-problem": pp, "P(improve)": poi}


def main_table(data: StudyData) -> Table:
    """Final eval per arm × base model × template, with the paired contrast to the reference."""
    ks = [k for k in m.eval_ks(data.history) if k > 1]
    big = f"eval/pass_at_{max(ks)}" if ks else None
    p1 = m.final_value(data.history, "eval/pass_at_1")
    rows = []
    for cell in m.cells(data):
        arm, model, template = cell
        t = data.trials
        planned = t[(t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]
        est = _cell_estimate(data, p1, cell)
        row = dict(arm=arm, model=model, template=template, N=f"{est.n}/{len(planned)}")
        row["pass@1"] = est
        row["IQM pass@1"] = stats.Estimate(*_iqm(data, p1, cell))
        if big:
            row[f"pass@{max(ks)}"] = _cell_estimate(data, m.final_value(data.history, big), cell)
        row["pass@1 @ equal tokens"] = _cell_estimate(
            data, at_equal_tokens(data, model, template), cell
        )
        row["acc / 1k tok"] = _cell_estimate(
            data, m.final_value(data.history, "eval/acc_per_1k_tokens"), cell
        )
        row["gen. tokens"] = _cell_estimate(
            data, m.final_value(data.history, "budget/generated_tokens"), cell
        )
        row.update(_contrast(data, cell, p1))
        rows.append(row)
    adjusted = stats.holm([r["p"] for r in rows])
    for row, p in zip(rows, adjusted, strict=True):
        row["p Holm"] = p
    best = {
        "pass@1",
        "IQM pass@1",
        "pass@1 @ equal tokens",
        "acc / 1k tok",
        *(f"pass@{k}" for k in ks),
    }
    caption = (
        "Final eval per arm: mean [95% stratified-bootstrap CI] over seeds, N = complete/"
        "planned trials; Δ is paired over the seeds complete in both arms."
    )
    return Table("main", caption, rows, best, MARKS)


def _iqm(data: StudyData, values: pd.Series, cell) -> tuple[float, float, float, int]:
    est = stats.interval_estimate(m.by_seed(data, values, *cell).dropna().to_numpy(), "iqm")
    return est.value, est.low, est.high, est.n


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
    """Training dynamics per cell: lengths by correctness, entropy, KL, clipping, ratio variance,
    generation compute (trend = last − first quarter of training)."""
    present = set(data.history["metric"].unique())
    columns = {k: v for k, v in DYNAMICS.items() if v[0] in present}
    summaries = {k: _summary(data, *v) for k, v in columns.items()}
    rows = []
    for cell in m.cells(data):
        row = dict(arm=cell[0], model=cell[1], template=cell[2])
        for name, values in summaries.items():
            row[name] = _cell_estimate(data, values, cell)
        rows.append(row)
    return Table("dynamics", "Training dynamics: mean [95% CI] over complete seeds.", rows)


def base_table(data: StudyData) -> Table:
    """Base Pass@k per model × template with the signal fraction (pass@G − pass^G)."""
    rows = []
    p = data.passk
    for _, r in p.iterrows() if len(p) else []:
        row = dict(model=r["model"], template=r["template"], k=int(r["k"]))
        row["pass@k"] = stats.Estimate(
            r["pass_at_k"], r["ci_low"], r["ci_high"], int(r["n_problems"])
        )
        row["pass^k"] = float(r["pass_hat_k"])
        row["signal"] = float(r["signal_fraction"])
        row["flag"] = "no signal to amplify" if r["signal_fraction"] < 0.05 and r["k"] > 1 else ""
        rows.append(row)
    caption = "Base models before RL: pass@k [95% CI over problems], N = problems."
    return Table("base", caption, rows)


def claims_table(claims: pd.DataFrame) -> Table:
    rows = []
    for _, c in claims.iterrows():
        est = stats.Estimate(c["value"], c["low"], c["high"], int(c["n"]))
        rows.append(
            dict(
                claim=c["id"],
                statement=c["statement"],
                statistic=c["statistic"],
                estimate=est,
                p=c["p_value"],
                verdict=c["verdict"],
                arms=c["arms"],
                note=c["note"],
            )
        )
    return Table("claims", "The tutorial's claims tested on this study's data.", rows)


def incomplete_table(data: StudyData) -> Table:
    bad = data.trials[~data.trials["complete"]]
    rows = [
        dict(
            arm=r.arm,
            model=r.model,
            template=r.template,
            seed=r.seed,
            status=r.status,
            reason=r.reason,
        )
        for r in bad.itertuples()
    ]
    return Table(
        "incomplete", "Failed, diverged or missing trials (excluded from all statistics).", rows
    )
