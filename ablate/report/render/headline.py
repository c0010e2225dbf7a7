"""The report's headline tables: the arms' configuration, final pass@1 with its contrasts, the
contrasts at equal generated tokens, the A/A checks and survivorship. Built once as rows of
`Estimate`s and plain values, written as Markdown, LaTeX and CSV by `formats`.

Seed-level numbers: a mean over seeds with a Student-t 95% interval (calibrated by simulation in
the test suite); below `inference.MIN_SEEDS` seeds a mean only. N is given once per row. Nothing is
bolded except a contrast that is significant after Holm.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ablate import confounds
from ablate.report.data.load import StudyData
from ablate.report.data.table import SIGNIFICANT, Table, TableSpec
from ablate.report.stats import contrasts as cx
from ablate.report.stats import inference
from ablate.report.stats import measures as m

UNIT = (0.0, 1.0)  # the range of pass@k: its intervals are clipped there


def seed_estimate(
    data: StudyData,
    values: pd.Series,
    cell: tuple[str, str, str],
    *,
    headline: bool = False,
    bounds: tuple[float, float] | None = None,
) -> inference.Estimate:
    """Mean over the cell's seeds with its t interval (none below MIN_SEEDS), clipped to the
    measure's range `bounds` (which cannot lose coverage: the truth lies inside it)."""
    series = m.by_seed(data, values, *cell, with_diverged=headline)
    est = inference.t_interval(series.dropna().to_numpy())
    if bounds is None or not np.isfinite(est.low):
        return est
    low, high = (float(np.clip(x, *bounds)) for x in (est.low, est.high))
    return dataclasses.replace(est, low=low, high=high)


def _planned(data: StudyData, cell: tuple[str, str, str]) -> pd.DataFrame:
    t = data.trials
    arm, model, template = cell
    return t[(t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]


def seeds_text(data: StudyData, cell: tuple[str, str, str]) -> str:
    """'3/3' (headline seeds / planned), with diverged and failed counts when there are any."""
    planned = _planned(data, cell)
    diverged = int((planned["outcome"] == "diverged").sum())
    used = int(planned["complete"].sum()) + diverged
    text = f"{used}/{len(planned)}"
    extra = [f"{diverged} diverged"] if diverged else []
    lost = len(planned) - used
    if lost:
        extra.append(f"{lost} failed/missing")
    return text + (f" ({', '.join(extra)})" if extra else "")


# --- arm configuration -----------------------------------------------------------------------
def config_table(data: StudyData) -> Table:
    """What each arm is, next to the reference: the confounds a reader must see first."""
    ref_name = data.reference_arm
    ref = data.algorithm(ref_name)
    per_step = m.tokens_per_step(data)
    rows = []
    for arm in dict.fromkeys(data.trials["arm"]):
        algo = data.algorithm(arm)
        diff = confounds.differing_fields(algo, ref)
        ids = data.trials[data.trials["arm"] == arm]["trial_id"]
        tokens = per_step.reindex(ids).dropna()
        rows.append(
            {
                "arm": arm,
                "differs from reference": _diff_text(arm, algo, diff, data),
                "updates / rollout": confounds.schedule(algo),
                "KL": confounds.kl_setting(algo),
                "dynamic sampling": "yes" if algo.dynamic_sampling else "no",
                "gen. tokens / step": round(float(tokens.mean()), 1) if len(tokens) else None,
            }
        )
    caption = (
        f"Arms against the reference `{ref_name}`: the fields each arm changes (every one is a "
        "possible cause of its contrast), its update schedule, KL term, dynamic sampling, and "
        "measured generated tokens per RL step (mean over its trials, discarded samples included)."
    )
    return Table(caption, rows)


def _diff_text(arm: str, algo, diff: list[str], data: StudyData) -> str:
    if arm == data.reference_arm:
        return "(reference)"
    if arm in data.replicates:
        return f"A/A replicate of {data.replicates[arm]} (independent seeds)"
    return ", ".join(f"{f}={getattr(algo, f)!r}" for f in diff) or "nothing (same algorithm)"


# --- headline --------------------------------------------------------------------------------
def _contrast_cells(row: cx.ContrastRow | None, arm: str, data: StudyData) -> dict:
    empty = {"Δ pass@1": None, "p (Holm)": None, "p sign-flip": None, "MDE 80%": None}
    if row is None:
        note = "reference" if arm == data.reference_arm else ""
        if arm in data.replicates:
            note = "A/A: see its table"
        return {**empty, "Δ pass@1": note, "seeds needed": ""}
    c = row.contrast
    return {
        "Δ pass@1": c.diff,
        "p (Holm)": row.p_holm,
        "p sign-flip": c.p_sign_flip,
        "MDE 80%": row.mde,
        "seeds needed": _needed_text(row, data.effect_of_interest),
        SIGNIFICANT: row.significant,
    }


def _needed_text(row: cx.ContrastRow, effect: float | None) -> str:
    if row.n < inference.MIN_SEEDS or not finite(row.contrast.sd):
        return ""

    def count(n: int | None) -> str:
        return str(n) if n is not None else "> 1000"

    text = f"{count(row.seeds_for_observed)} for Δ"
    return text + (f"; {count(row.seeds_for_effect)} for {effect:g}" if effect else "")


def main_table(data: StudyData) -> Table:
    """Final eval pass@1 per arm × base model × template, its paired contrast to the reference
    and the power of that contrast."""
    rows = cx.headline_contrasts(data)
    by_cell = {(r.arm, r.model, r.template): r for r in rows}
    p1 = m.headline(data, m.final_value(data.history, "eval/pass_at_1"))
    out = []
    for cell in m.cells(data):
        arm, model, template = cell
        row = {"arm": arm, "base · template": f"{model} · {template}"}
        row["seeds"] = seeds_text(data, cell)
        row["pass@1"] = seed_estimate(data, p1, cell, headline=True, bounds=UNIT)
        row.update(_contrast_cells(by_cell.get(cell), arm, data))
        out.append(row)
    m_family = max((r.family for r in rows), default=0)
    caption = (
        "Final eval pass@1: mean over seeds [95% Student-t interval]; seeds = seeds in the "
        "headline / planned (diverged trials count as pass@1 = 0). Δ pass@1 = arm − reference, "
        f"paired by seed [95% t interval]; p (Holm) = paired t-test, Holm-adjusted over the "
        f"{m_family} contrasts of this table; p sign-flip = exact sign-flip test of the same "
        "per-seed differences (robustness; needs 6 seeds to go below 0.05). MDE 80% = smallest "
        f"|Δ| this many seeds detect with 80% power at α = 0.05/{max(m_family, 1)}, from the "
        "observed SD of the paired differences (a few seeds underestimate it: read it as "
        "optimistic). seeds needed = seeds for 80% power to detect the observed |Δ| (and the "
        "study's effect of interest). Below 3 seeds: a mean only, no interval, test or mark."
    )
    marks = {"*": f"Holm-adjusted paired t p < 0.05 over the table's {m_family} contrasts"}
    return Table(caption, out, marks, contrast_column="Δ pass@1")


def compute_table(data: StudyData) -> Table:
    """The headline contrasts at equal generated tokens."""
    out = []
    for r in cx.token_contrasts(data):
        out.append(
            {
                "arm": r.arm,
                "base · template": r.cell,
                "tokens": round(r.tokens) if finite(r.tokens) else None,
                "seeds": r.n,
                "Δ pass@1 @ equal tokens": r.contrast.diff,
                "p (Holm)": r.p_holm,
                "p sign-flip": r.contrast.p_sign_flip,
                "read as": r.note,
                SIGNIFICANT: r.significant,
            }
        )
    caption = (
        "The contrasts at equal generated training tokens (dynamic sampling's discarded samples "
        "included): eval pass@1 of every trial at the largest token count all trials of the cell "
        "reached, paired by seed [95% t interval]; Holm over this table's contrasts."
    )
    marks = {"*": "Holm-adjusted paired t p < 0.05 over this table's contrasts"}
    return Table(caption, out, marks, contrast_column="Δ pass@1 @ equal tokens")


def aa_table(data: StudyData) -> Table:
    """Each A/A replicate against the arm it replicates."""
    out = [
        {
            "replicate": r.arm,
            "of": r.reference,
            "base · template": r.cell,
            "seeds": r.n,
            "Δ pass@1": r.contrast.diff,
            "p (Welch, Holm)": r.p_holm,
            "check": "CALIBRATION FAILURE" if r.significant else "passed",
            SIGNIFICANT: r.significant,
        }
        for r in cx.replicate_contrasts(data)
    ]
    caption = (
        "A/A checks: an arm against its replicate (same algorithm, independent seed streams), "
        "Welch's t-test, Holm over these rows. Any significant difference means the pipeline's "
        "error rates are not what the report claims."
    )
    return Table(caption, out, {"*": "Holm-adjusted Welch p < 0.05"}, "Δ pass@1")


# --- survivorship ----------------------------------------------------------------------------
def survival_table(data: StudyData) -> Table:
    rows = []
    for cell in m.cells(data):
        planned = _planned(data, cell)
        diverged = planned[planned["outcome"] == "diverged"]
        steps = sorted(int(s) for s in diverged["diverged_step"].dropna())
        rows.append(
            {
                "arm": cell[0],
                "base · template": f"{cell[1]} · {cell[2]}",
                "planned": len(planned),
                "finished": int(planned["complete"].sum()),
                "diverged": len(diverged),
                "diverged at step": ", ".join(map(str, steps)),
                "failed": int((planned["outcome"] == "failed").sum()),
                "missing / unfinished": int(
                    (~planned["complete"] & ~planned["outcome"].isin(["diverged", "failed"])).sum()
                ),
            }
        )
    caption = f"Trials per arm: planned, finished, diverged, failed. Rule: {m.DIVERGED_RULE}."
    return Table(caption, rows)


def incomplete_table(data: StudyData) -> Table:
    bad = data.trials[~data.trials["complete"]]
    rows = [
        dict(
            arm=r.arm,
            model=r.model,
            template=r.template,
            seed=r.seed,
            status=r.status,
            outcome=r.outcome,
            reason=r.reason,
        )
        for r in bad.itertuples()
    ]
    caption = f"Trials that did not finish, with the reason. Rule: {m.DIVERGED_RULE}."
    return Table(caption, rows)


def finite(x: object) -> bool:
    return isinstance(x, float | int | np.floating) and bool(np.isfinite(x))


def has_replicates(data: StudyData) -> bool:
    return bool(cx.replicate_contrasts(data))


TABLES = (
    TableSpec(name="configuration", build=config_table, order=10),
    TableSpec(name="main", build=main_table, order=20),
    TableSpec(name="equal_tokens", build=compute_table, order=40),
    TableSpec(name="aa", build=aa_table, order=50, applies=has_replicates),
    TableSpec(name="survival", build=survival_table, order=60),
    TableSpec(name="incomplete", build=incomplete_table, order=70),
)
