"""The best-elicited base table: each arm's final pass@1 beside its base under the setting it was
trained in, under a lenient parse, under the best prompt and under the best point of the study's
elicitation grid; the RL gain over step 0 and over the best-elicited base; and the format share
(how much of the gain a setting alone already gives). Applies when the study declares
`PassKSpec(elicit=ElicitSpec(...))`."""

from __future__ import annotations

import numpy as np

from ablate.report.data import numbers
from ablate.report.data.load import StudyData
from ablate.report.data.table import Table, TableSpec
from ablate.report.stats import elicited as el
from ablate.report.stats import measures as m
from ablate.report.stats import problems as pr

GAIN_OVER_BEST = "RL gain over best elicited base"


def gains_over_best(data: StudyData) -> dict[tuple[str, str, str], object]:
    """(arm, model, template) -> the task-level RL gain over the best-elicited base."""
    rates = pr.final_rates(data)
    out = {}
    for cell in m.cells(data):
        base = el.elicited_base(data.elicitation, cell[1], cell[2])
        if base is None or el.BEST not in base.rates or not len(rates):
            continue
        out[cell] = el.gain_over(pr.cell_matrix(data, rates, *cell), base.rates[el.BEST])
    return out


def elicited_table(data: StudyData) -> Table:
    rates = pr.final_rates(data)
    final = m.headline(data, m.final_value(data.history, "eval/pass_at_1"))
    step0 = m.base_value(data, 1)
    rows = []
    for cell in m.cells(data):
        base = el.elicited_base(data.elicitation, cell[1], cell[2])
        if base is None:
            continue
        ids = _cell_ids(data, cell)
        final_mean, start = _mean(final.reindex(ids)), _mean(step0.reindex(ids))
        shares = el.shares(final_mean, base)
        matrix = pr.cell_matrix(data, rates, *cell) if len(rates) else None
        rows.append(
            {
                "arm": cell[0],
                "base · template": f"{cell[1]} · {cell[2]}",
                "step 0": start,
                "base as trained": base.mean(el.AS_TRAINED),
                "lenient parse": base.mean(el.LENIENT),
                "best prompt": base.mean(el.BEST_PROMPT),
                "best elicited": base.mean(el.BEST),
                "best elicited setting": base.labels.get(el.BEST, ""),
                "final": final_mean,
                "RL gain over step 0": final_mean - start,
                GAIN_OVER_BEST: _gain(matrix, base),
                **{f"share: {name}": _percent(shares[role]) for role, name in el.SHARES.items()},
            }
        )
    return Table(_caption(), rows, contrast_column=GAIN_OVER_BEST)


def elicited_sentences(data: StudyData) -> list[str]:
    """One sentence per arm: its gain over the best-elicited base and the format shares."""
    out = []
    for row in elicited_table(data).rows:
        gain = row[GAIN_OVER_BEST]
        if gain is None or not np.isfinite(gain.value):
            continue
        change = numbers.estimate(gain.value, gain.low, gain.high, sign=True)
        shares = [f"{name} {row[f'share: {name}']}" for name in el.SHARES.values()]
        shares = [s for s in shares if not s.endswith("None")]
        tail = (
            f"; share of its gain over the as-trained base: {', '.join(shares)}" if shares else ""
        )
        out.append(
            f"{row['arm']} ({row['base · template']}): final pass@1 "
            f"{numbers.num(row['final'])}, {change} over the best-elicited base "
            f"({numbers.num(row['best elicited'])} under {row['best elicited setting']}), "
            f"{numbers.num(row['RL gain over step 0'], sign=True)} over step 0{tail}."
        )
    return out


def _gain(matrix, base: el.ElicitedBase):
    if matrix is None or el.BEST not in base.rates:
        return None
    return el.gain_over(matrix, base.rates[el.BEST])


def _caption() -> str:
    return (
        "RL gains against the best-elicited base. Each base column is the base model's eval "
        "pass@1 on the trials' eval problems: as trained (the trials' template, no examples, "
        "the eval temperature, strict parse), with a lenient parse (also the last number), "
        "under the best prompt (template × examples, strict, eval temperature) and under the "
        "best point of the declared grid (templates × examples × temperatures × parses). "
        "Both bests were chosen on a selection split (train problems, none of them eval "
        "problems) and measured afresh here, so they carry no winner's curse. RL gain over "
        "best elicited base = final − best elicited, paired by problem, mean over seeds and "
        "problems [95% crossed seed × problem interval]. share: how much of the gain over the "
        "as-trained base the setting alone already gives ((base under it − base as trained) / "
        "(final − base as trained)); blank where that gain is not positive."
    )


def _cell_ids(data: StudyData, cell: tuple[str, str, str]):
    t = data.trials
    arm, model, template = cell
    keep = (t["arm"] == arm) & (t["model"] == model) & (t["template"] == template)
    return t[keep]["trial_id"].to_numpy()


def _mean(values) -> float:
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def _percent(share: float) -> str | None:
    return f"{100 * share:.0f}%" if np.isfinite(share) else None


def has_elicitation(data: StudyData) -> bool:
    return not data.elicitation.empty


TABLES = (TableSpec(name="elicited_base", build=elicited_table, applies=has_elicitation),)
