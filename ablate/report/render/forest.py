"""The forest plot: every contrast of the report at a glance, one panel per base · template
cell. Each row is one arm against the one it is compared with: Δ pass@1 (arm − reference) as a
marker whose shape says the verdict (different, equivalent, inconclusive), its 95% interval as a
thin line and the 90% interval TOST reads as a thick one, the zero line and the declared
equivalence band ±margin shaded. The verdicts are the tables' (Holm-adjusted within each family);
the rows are the primary family's (the main table, or the equal-tokens table when the study
declares that primary) followed by the live controls (A/A, positive, graded)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ablate.report.data.load import StudyData
from ablate.report.render.palette import BAND, NEUTRAL, study_styles
from ablate.report.stats import contrasts as cx


@dataclass(frozen=True)
class ForestRow:
    """One contrast as the forest plot draws it."""

    cell: str  # "model · template"
    arm: str
    reference: str
    kind: str  # the family: equal steps, equal tokens, A/A, positive control
    value: float
    low: float  # 95% interval
    high: float
    low90: float  # TOST's 90% interval
    high90: float
    p_holm: float
    verdict: str
    n: int

    @property
    def label(self) -> str:
        """The row's name on the plot: the arm, and what it is compared with when that is not
        the study's reference (an A/A replicate against its twin)."""
        if self.kind == cx.AA:
            return f"{self.arm} vs {self.reference} (A/A)"
        if self.kind in (cx.CONTROL, cx.GRADED):
            return f"{self.arm} ({self.kind})"
        return self.arm


def _row(r: cx.ContrastRow) -> ForestRow:
    d = r.contrast.diff
    return ForestRow(
        cell=r.cell,
        arm=r.arm,
        reference=r.reference,
        kind=r.kind,
        value=float(d.value),
        low=float(d.low),
        high=float(d.high),
        low90=float(r.interval90[0]),
        high90=float(r.interval90[1]),
        p_holm=float(r.p_holm),
        verdict=r.verdict or "",
        n=int(r.n),
    )


def forest_rows(data: StudyData) -> list[ForestRow]:
    """The primary family's contrasts, then the A/A, positive and graded controls', in order."""
    family = cx.primary_contrasts(data)
    controls = [
        *cx.replicate_contrasts(data),
        *cx.control_contrasts(data),
        *cx.graded_contrasts(data),
    ]
    return [_row(r) for r in [*family, *controls]]


def by_cell(rows: list[ForestRow]) -> dict[str, list[ForestRow]]:
    """Rows grouped by base · template cell, cells and rows in their first-seen order."""
    out: dict[str, list[ForestRow]] = {}
    for row in rows:
        out.setdefault(row.cell, []).append(row)
    return out


#: Marker per verdict: filled where the data decide (different, equivalent), open where not.
MARKERS = {
    cx.DIFFERENT: ("o", True),
    cx.EQUIVALENT: ("D", True),
    cx.INCONCLUSIVE: ("o", False),
}
NO_VERDICT = ("s", False)  # below MIN_SEEDS seeds, or a sequential design still looking


def verdict_text(row: ForestRow) -> str:
    """The label printed beside a row: the verdict and its Holm p, or why there is none."""
    if not row.verdict:
        return f"no test (n={row.n})"
    p = f", p={row.p_holm:.2g}" if math.isfinite(row.p_holm) else ""
    return f"{row.verdict}{p}"


def extent(rows: list[ForestRow], margin: float | None) -> tuple[float, float]:
    """The x range every panel shares: all intervals, zero and the band, with a little room."""
    ends = [x for r in rows for x in (r.low, r.high, r.value) if math.isfinite(x)]
    ends += [0.0] + ([-margin, margin] if margin else [])
    lo, hi = min(ends), max(ends)
    pad = 0.08 * (hi - lo or 1.0)
    return lo - pad, hi + pad


#: Kinds of contrast that certify the design rather than answer the question: drawn in their
#: own panel on their own scale (a positive control's large Δ would squeeze every primary
#: contrast into a sliver of the width).
CONTROL_KINDS = (cx.AA, cx.CONTROL, cx.GRADED)
CONTROLS_TITLE = "Controls (their own scale)"


def _draw_panel(ax, title: str, rows: list[ForestRow], data: StudyData, labels: list[str]):
    styles, margin = study_styles(data), data.margin
    if margin:
        ax.axvspan(-margin, margin, color=BAND, zorder=0)
    ax.axvline(0.0, color=NEUTRAL, lw=0.8, zorder=1)
    for y, row in enumerate(rows):
        color = styles[row.arm].color if row.arm in styles else NEUTRAL
        if math.isfinite(row.low):
            ax.plot([row.low, row.high], [y, y], color=color, lw=1.0)
            ax.plot([row.low90, row.high90], [y, y], color=color, lw=3.0, alpha=0.6)
        marker, filled = MARKERS.get(row.verdict, NO_VERDICT)
        face = color if filled else "white"
        ax.plot(row.value, y, marker, color=color, mfc=face, ms=7, mew=1.5, zorder=3)
        ax.annotate(
            verdict_text(row),
            xy=(1.01, y),
            xycoords=("axes fraction", "data"),
            va="center",
            fontsize=8,
        )
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_title(title, fontsize=9, loc="left")


def panels(rows: list[ForestRow]) -> list[tuple[str, list[ForestRow], list[str]]]:
    """(title, rows, row labels) per panel: one per base · template cell for the primary
    contrasts, then one for every control (labelled with its cell when there are several)."""
    primary = [r for r in rows if r.kind not in CONTROL_KINDS]
    controls = [r for r in rows if r.kind in CONTROL_KINDS]
    out = [(cell, rs, [r.label for r in rs]) for cell, rs in by_cell(primary).items()]
    if controls:
        several = len({r.cell for r in controls}) > 1
        labels = [f"{r.label} · {r.cell}" if several else r.label for r in controls]
        out.append((CONTROLS_TITLE, controls, labels))
    return out


XLABEL = "Δ eval pass@1, arm − reference (95% interval thin, 90% thick)"


def figure(data: StudyData, plt, axis: str | None = None):
    """The forest plot, or None when the study has no contrast: the primary panels share one
    x range fitted to the primary contrasts; the controls' panel has its own."""
    rows = forest_rows(data)
    if not rows:
        return None
    laid = panels(rows)
    heights = [len(r) + 1.6 for _, r, _ in laid]
    fig, axes = plt.subplots(
        len(laid), 1, figsize=(7.5, 1.4 + 0.32 * sum(heights)), squeeze=False,
        gridspec_kw={"height_ratios": heights},
    )  # fmt: skip
    axes = list(axes[:, 0])
    for ax, (title, panel_rows, labels) in zip(axes, laid, strict=True):
        _draw_panel(ax, title, panel_rows, data, labels)
    control = laid[-1][0] == CONTROLS_TITLE
    primary_axes = axes[: len(axes) - control]
    primary_rows = [r for r in rows if r.kind not in CONTROL_KINDS]
    for ax in primary_axes:
        ax.set_xlim(*extent(primary_rows, data.margin))
        ax.tick_params(labelbottom=ax is primary_axes[-1])
    if primary_axes:
        primary_axes[-1].set_xlabel(XLABEL, fontsize=8)
    if control:
        axes[-1].set_xlim(*extent(laid[-1][1], data.margin))
        axes[-1].set_xlabel(XLABEL, fontsize=8)
    _legend(fig, data.margin)
    fig.suptitle("Every contrast: verdicts Holm-adjusted within each family", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 0.97))  # the verdict labels count in the layout
    return fig


def _legend(fig, margin: float | None) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Line2D([], [], marker=marker, ls="", mec="k", mfc="k" if filled else "white", label=v)
        for v, (marker, filled) in MARKERS.items()
    ]
    handles.append(Line2D([], [], marker="s", ls="", mec="k", mfc="white", label="no test"))
    if margin:
        handles.append(Patch(color=BAND, label=f"equivalence ±{margin:g}"))
    fig.legend(handles=handles, loc="lower center", fontsize=7, ncol=len(handles), frameon=False)
