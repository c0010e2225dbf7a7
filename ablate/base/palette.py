"""One colour per arm, in every view of a study: Okabe & Ito's colour-blind-safe palette (Okabe &
Ito 2008, "Color Universal Design"), assigned in the study's declared arm order. The report's
figures (`ablate.report.render.palette`) and the MLflow view (`ablate.tracking.mlflow_views`)
read it from here, so an arm has one colour in both."""

from __future__ import annotations

#: Okabe–Ito, black first dropped to the end: black reads as "the axis" next to zero lines.
OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)


def arm_color(position: int) -> str:
    """The colour of the arm at `position` in the study's declared order (repeating past 8)."""
    return OKABE_ITO[position % len(OKABE_ITO)]
