"""The report's headline tables: final pass@1 with its contrasts, the contrasts at equal
generated tokens, the live controls (A/A, positive, graded) and the sequential looks; and the
estimates every table of arms reads (`seed_estimate`, `task_estimate`, `seeds_text`). The arms'
configuration is `configuration`, survivorship `survival`. Built once as rows of `Estimate`s
and plain values, written as Markdown, LaTeX and CSV by `formats`.

Task-level numbers: a mean over seeds and eval problems with the crossed seed × problem 95%
interval (`stats.crossed`, calibrated by simulation); without per-problem records, a Student-t
interval over seeds, labelled "fixed problems". Below `inference.MIN_SEEDS` seeds a mean only.
N is given once per row. Nothing is bolded except a contrast whose verdict is *different*.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from ablate.report.data.load import StudyData
from ablate.report.data.table import SIGNIFICANT, Table, TableSpec
from ablate.report.render import elicited
from ablate.report.stats import contrasts as cx
from ablate.report.stats import controls as ctl
from ablate.report.stats import crossed, inference
from ablate.report.stats import divergence as dv
from ablate.report.stats import measures as m
from ablate.report.stats import problems as pr
from ablate.report.stats.information import SEED_GAIN
from ablate.report.stats.sequential_data import replay_study

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
    return _clipped(inference.t_interval(series.dropna().to_numpy()), bounds)


def _clipped(est: inference.Estimate, bounds: tuple[float, float] | None) -> inference.Estimate:
    if bounds is None or not np.isfinite(est.low):
        return est
    low, high = (float(np.clip(x, *bounds)) for x in (est.low, est.high))
    return dataclasses.replace(est, low=low, high=high)


def task_estimate(data: StudyData, values: pd.Series, cell: tuple[str, str, str]):
    """An arm's final pass@1 about the task (seeds × problems) when per-problem records exist,
    else over seeds given the problems, over its surviving seeds (a diverged trial is its own
    outcome, `stats.divergence`); with the reading's name."""
    rates = pr.final_rates(data)
    y = np.empty((0,))
    if len(rates):
        y = pr.complete_matrix(pr.cell_matrix(data, rates, *cell, diverged=False))
    if y.ndim == 2 and y.shape[1] >= 2 and y.shape[0] >= 1:
        return _clipped(crossed.estimate(y), UNIT), cx.TASK
    return seed_estimate(data, values, cell, bounds=UNIT), cx.FIXED


def cell_trials(data: StudyData, cell: tuple[str, str, str]) -> pd.DataFrame:
    t = data.trials
    arm, model, template = cell
    return t[(t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)]


def seeds_text(data: StudyData, cell: tuple[str, str, str]) -> str:
    """'3/3' (headline seeds / planned), with diverged and failed counts when there are any."""
    planned = cell_trials(data, cell)
    diverged = int((planned["outcome"] == "diverged").sum())
    used = int(planned["complete"].sum()) + diverged
    text = f"{used}/{len(planned)}"
    extra = [f"{diverged} diverged"] if diverged else []
    lost = len(planned) - used
    if lost:
        extra.append(f"{lost} failed/missing")
    return text + (f" ({', '.join(extra)})" if extra else "")


def _divergence_cells(row: cx.ContrastRow | None) -> dict:
    """Divergence as its own outcome (a study with divergence only): counts arm vs reference,
    the exact test Holm-adjusted, the hurdle Δ."""
    d = row.divergence if row is not None else None
    if d is None:
        return {"diverged": None, "p diverged (Holm)": None, "hurdle Δ": None}
    hurdle = d.hurdle if d.any else None  # no divergence in either arm: Δ pass@1 says it all
    return {"diverged": d.counts, "p diverged (Holm)": d.p_holm, "hurdle Δ": hurdle}


def _contrast_cells(row: cx.ContrastRow | None, arm: str, data: StudyData) -> dict:
    empty = {"Δ pass@1": None, "p (Holm)": None, "verdict": None, "MDE 80%": None}
    if row is None:
        note = "reference" if arm == data.reference_arm else ""
        if arm in data.replicates:
            note = "A/A: see controls"
        if arm == data.positive_control:
            note = "positive control: see controls"
        return {**empty, "Δ pass@1": note, "p fixed problems": None}
    return {
        "Δ pass@1": row.contrast.diff,
        "p (Holm)": row.p_holm,
        "verdict": row.verdict,
        "MDE 80%": row.mde,
        "p fixed problems": row.fixed.p_value if row.fixed is not None else None,
        SIGNIFICANT: row.significant,
    }


def _margin_text(data: StudyData) -> str:
    margin = data.margin
    return f"±{margin:g}" if margin else "no margin declared (set Study(equivalence_margin=…))"


#: The checkpoint every headline number is read at, stated in the headline's caption. The best
#: checkpoint along the way is never read off the eval split: choosing it there is selection on the
#: test set and overstates the arm (TTRL#40: 13.13 at the last checkpoint, above 17 at the best on
#: AIME). The best-checkpoint reading exists only as its own labelled table, chosen on a
#: selection split (`EvalSpec.selection_problems`, `render.checkpoints`).
CHECKPOINT_RULE = (
    "Checkpoint: each trial's final one (its last eval), never the best along the way; a "
    "best-checkpoint reading, where the study declares a selection split "
    "(EvalSpec(selection_problems=…)), is a separate labelled table chosen on that split."
)


def main_table(data: StudyData) -> Table:
    """Final eval pass@1 per arm × base model × template, its contrast to the reference, the
    verdict and the power of that contrast."""
    rows = cx.headline_contrasts(data)
    by_cell = {(r.arm, r.model, r.template): r for r in rows}
    p1 = m.final_value(data.history, "eval/pass_at_1")
    over_best = elicited.gains_over_best(data) if elicited.has_elicitation(data) else None
    diverging = dv.has_divergence(data)
    out, readings = [], set()
    for cell in m.cells(data):
        arm, model, template = cell
        row = {"arm": arm, "base · template": f"{model} · {template}"}
        row["seeds"] = seeds_text(data, cell)
        row["pass@1"], reading = task_estimate(data, p1, cell)
        readings.add(reading)
        row.update(_contrast_cells(by_cell.get(cell), arm, data))
        if diverging:  # a study without divergence shows no divergence columns
            row.update(_divergence_cells(by_cell.get(cell)))
        if over_best is not None:  # the gain a fair baseline leaves (see the elicited-base table)
            row[elicited.GAIN_OVER_BEST] = over_best.get(cell)
        out.append(row)
    m_family = max((r.family for r in rows), default=0)
    primary = "the primary family" if data.primary == cx.STEPS else "a secondary family"
    if data.looks and data.primary == cx.STEPS:
        primary += "; verdicts from its sequential design, see the sequential table"
    caption = (
        f"Final eval pass@1 ({primary}): mean over seeds and eval problems [95% interval "
        f"{_reading_text(readings)}]; seeds = finished and diverged / planned. "
        + (DIVERGENCE_TEXT if diverging else "")
        + "Δ pass@1 = arm − reference, paired by seed and problem; p (Holm) "
        f"= its test, Holm-adjusted over the {m_family} contrasts of this table; verdict: "
        "different (Holm p < 0.05), equivalent (the 90% interval inside "
        f"{_margin_text(data)}) or inconclusive. MDE 80% = smallest |Δ| this design detects "
        f"with 80% power at α = 0.05/{max(m_family, 1)}, with the seed variance at its 80% upper "
        "confidence bound. p fixed problems = paired t over per-seed means, a statement about "
        "these eval problems only. Below 3 seeds: a mean only, no interval, test or verdict. "
        + CHECKPOINT_RULE
    )
    marks = {"*": f"verdict different: Holm p < 0.05 over the table's {m_family} contrasts"}
    return Table(caption, out, marks, contrast_column="Δ pass@1")


DIVERGENCE_TEXT = (
    "Divergence is its own outcome: pass@1 is over an arm's surviving seeds and Δ pass@1 over "
    "the seeds where both arms survived (conditional on surviving if divergence picks its "
    "seeds); diverged = diverged / trials with an algorithm outcome, arm vs reference, p "
    "diverged (Holm) = Boschloo's exact test of the two rates, Holm over the table; hurdle Δ "
    "(where either arm diverged) = (1 − q_arm)·pass@1_arm − (1 − q_ref)·pass@1_ref, a diverged "
    "run counted as 0, with a "
    "delta-method interval (conservative with few seeds: 0 of 5 diverged cannot rule out a "
    "real rate). "
)


def _reading_text(readings: set[str]) -> str:
    if readings == {cx.TASK}:
        return "about the task: seeds × problems, crossed"
    if readings == {cx.FIXED}:
        return "over seeds, given these eval problems: no per-problem records"
    return "about the task where per-problem records exist, else given the problems"


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
                "verdict": r.verdict,
                "reading": r.reading,
                "read as": r.note,
                SIGNIFICANT: r.significant,
            }
        )
    primary = "the primary family" if data.primary == cx.TOKENS else "a secondary family"
    caption = (
        f"The contrasts at equal generated training tokens ({primary}; dynamic sampling's "
        "discarded samples included): eval pass@1 of every trial at the largest token count all "
        "trials of the cell reached, paired by seed (and problem, where the eval made at the "
        "mark is on record) [95% interval]; Holm over this table's contrasts; verdicts as in "
        f"the main table (margin {_margin_text(data)})."
    )
    marks = {"*": "verdict different: Holm p < 0.05 over this table's contrasts"}
    return Table(caption, out, marks, contrast_column="Δ pass@1 @ equal tokens")


def control_table(data: StudyData) -> Table:
    """The live controls: each A/A replicate against its twin (no difference expected), the
    positive control and the graded control against the reference (real differences expected),
    each control with its MDE and its detection probability at its declared effect."""
    out = []
    rows = [*cx.replicate_contrasts(data), *cx.control_contrasts(data), *cx.graded_contrasts(data)]
    for r in rows:
        power = ctl.control_power(r, data.control_effects.get(r.arm))
        out.append(
            {
                "control": _CONTROL_KINDS.get(r.kind, r.kind),
                "arm": r.arm,
                "against": r.reference,
                "base · template": r.cell,
                "seeds": r.n,
                "Δ pass@1": r.contrast.diff,
                "p (Holm)": r.p_holm,
                "verdict": r.verdict,
                "declared Δ": power.declared,
                "MDE 80%": r.mde if r.kind != cx.AA else None,
                "P(detect) at declared": power.detection if power.declared is not None else None,
                "check": control_check(r, power),
                SIGNIFICANT: r.significant,
            }
        )
    caption = (
        "Live controls, each kind its own Holm family. A/A: an arm against its replicate (same "
        "algorithm, same data order and eval samples, rollouts of its own), paired like every "
        "contrast: a *different* verdict means the report's error rates are not what it claims. "
        "Positive control: an arm with a known, real effect against the reference: if it is not "
        "*different*, the study is underpowered for effects of that size. Graded control: a "
        "declared, smaller effect (e.g. a share of the rewards randomised), missed 1 − P(detect) "
        "of the time by design. Each control's MDE (80% power) and its probability of detection "
        "at the effect the study declared for it are for the design it ran in (its seeds and "
        "problems), the seed variance at its 80% upper bound."
    )
    return Table(caption, out, {"*": "verdict different (Holm p < 0.05)"}, "Δ pass@1")


_CONTROL_KINDS = {cx.AA: "A/A (negative)", cx.CONTROL: "positive", cx.GRADED: "graded"}


def control_check(r: cx.ContrastRow, power: ctl.ControlPower | None = None) -> str:
    if r.n < inference.MIN_SEEDS:
        return "too few seeds"
    if r.kind == cx.AA:
        return "CALIBRATION FAILURE" if r.significant else "passed"
    return ctl.check(r, power or ctl.control_power(r, None))


def sequential_table(data: StudyData) -> Table:
    """Every look of every primary contrast under the study's sequential design."""
    out = []
    for result in replay_study(data).values():
        for look in result.history:
            out.append(
                {
                    "contrast": result.name,
                    "look": look.look,
                    "seeds": f"{look.seeds} of {look.planned}",
                    "information": look.information,
                    "Δ pass@1": inference.Estimate(look.estimate, look.low, look.high, look.seeds),
                    "p": look.p_value,
                    "nominal level": look.nominal,
                    "verdict": look.verdict + (SEEDS_CANNOT_HELP if look.seeds_cannot_help else ""),
                }
            )
    caption = (
        f"Sequential design: looks at {list(data.looks)} seeds, alpha spent by "
        f"{data.spending.replace('_', '–')} (Lan–DeMets) at each look's information fraction "
        "(information = Var(Δ̂) projected to the last look / Var(Δ̂) now, from the seeds × "
        "problems components), Bonferroni over the primary family; a contrast stops at the first "
        "look where p < its nominal level (different), its interval at 1 − 2·(TOST level) lies "
        f"inside {_margin_text(data)} (equivalent), or the remaining seeds would lower its SE by "
        f"less than {100 * SEED_GAIN:.0f}% (seeds cannot help: the look spends all its alpha; "
        "more eval problems or "
        "samples would help). Δ with its repeated confidence interval at 1 − nominal level; "
        "task-level (seeds × problems), among the seeds where both arms survived."
    )
    return Table(caption, out)


SEEDS_CANNOT_HELP = ": seeds cannot help, more problems or samples would"


def has_looks(data: StudyData) -> bool:
    return bool(data.looks) and data.primary == cx.STEPS and not data.samples.empty


def finite(x: object) -> bool:
    return isinstance(x, float | int | np.floating) and bool(np.isfinite(x))


def has_controls(data: StudyData) -> bool:
    controls = cx.replicate_contrasts(data) or cx.control_contrasts(data)
    return bool(controls or cx.graded_contrasts(data))


TABLES = (
    TableSpec(name="main", build=main_table),
    TableSpec(name="equal_tokens", build=compute_table),
    TableSpec(name="controls", build=control_table, applies=has_controls),
    TableSpec(name="sequential", build=sequential_table, applies=has_looks),
)
