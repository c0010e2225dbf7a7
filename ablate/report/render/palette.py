"""One colour per arm, the same in every figure of a report: Okabe & Ito's colour-blind-safe
palette (Okabe & Ito 2008, "Color Universal Design"), assigned in the study's declared arm order,
so an arm keeps its colour in a figure that shows only some of the arms (a cell with the
reference alone, the compute curves). Past eight arms the colours repeat with a dashed, then a
dotted line, so no two arms of a study share colour and line style below 24 arms."""

from __future__ import annotations

from dataclasses import dataclass

from ablate.base.palette import OKABE_ITO
from ablate.report.data.load import StudyData

LINE_STYLES = ("-", "--", ":")
#: Greys for what is not an arm (zero line, equivalence band, base models).
NEUTRAL = "#7f7f7f"
BAND = "#dddddd"


@dataclass(frozen=True)
class ArmStyle:
    color: str
    line: str


def arm_order(data: StudyData) -> list[str]:
    """The study's arms in declared order (the order its trials were expanded in)."""
    return list(dict.fromkeys(data.trials["arm"]))


def arm_styles(arms: list[str]) -> dict[str, ArmStyle]:
    """arm -> its colour and line style, by position in `arms` (the study's declared order)."""
    out = {}
    for i, arm in enumerate(dict.fromkeys(arms)):
        cycle, slot = divmod(i, len(OKABE_ITO))
        out[arm] = ArmStyle(OKABE_ITO[slot], LINE_STYLES[cycle % len(LINE_STYLES)])
    return out


def study_styles(data: StudyData) -> dict[str, ArmStyle]:
    """Every arm of the study with its style: what each figure draws an arm in."""
    return arm_styles(arm_order(data))
