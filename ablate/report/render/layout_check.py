"""Does a figure read? Every piece of text it draws (titles, axis labels, the tick labels
matplotlib actually draws, annotations, legend entries), placed by matplotlib's own layout
(`get_window_extent` after a draw), checked for two faults a reader sees at once: two texts on
top of each other, and a text cut off at the canvas edge. The report's figure tests run every
figure through `layout_faults`."""

from __future__ import annotations

from dataclasses import dataclass

#: Overlaps or overhangs smaller than this (pixels at the figure's dpi) are antialiasing.
TOLERANCE_PX = 1.0


@dataclass(frozen=True)
class Placed:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: Placed, tol: float = TOLERANCE_PX) -> bool:
        wide = min(self.x1, other.x1) - max(self.x0, other.x0)
        tall = min(self.y1, other.y1) - max(self.y0, other.y0)
        return wide > tol and tall > tol


def _drawn_tick_labels(ax) -> list:
    """The tick labels matplotlib draws: those of ticks inside the view (a label switched off
    is invisible, and `_shown` drops it)."""
    out = []
    for axis in (ax.xaxis, ax.yaxis):
        for tick in axis._update_ticks():  # the ticks a draw places (inside the view limits)
            out += [tick.label1, tick.label2]
    return out


def _shown(text) -> bool:
    if not text.get_visible() or not text.get_text().strip():
        return False
    ax = text.axes
    return ax is None or ax.get_visible()


def placed_texts(fig) -> list[Placed]:
    """Every text the figure draws, with its box in display pixels."""
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    every_tick = [
        tick
        for ax in fig.axes
        for axis in (ax.xaxis, ax.yaxis)
        for tick in axis.get_major_ticks() + axis.get_minor_ticks()
    ]
    ticks = {id(t) for tick in every_tick for t in (tick.label1, tick.label2)}
    texts = [t for t in fig.findobj(Text) if id(t) not in ticks]
    texts += [t for ax in fig.axes if ax.get_visible() for t in _drawn_tick_labels(ax)]
    out = []
    for text in texts:
        if _shown(text):
            box = text.get_window_extent(renderer)
            out.append(Placed(text.get_text(), box.x0, box.y0, box.x1, box.y1))
    return out


def layout_faults(fig) -> list[str]:
    """Texts that overlap another or run past the canvas, one line each; [] for a figure that
    reads."""
    placed = placed_texts(fig)
    width, height = fig.canvas.get_width_height()
    faults = []
    for i, a in enumerate(placed):
        faults += [f"{a.text!r} overlaps {b.text!r}" for b in placed[i + 1 :] if a.overlaps(b)]
        cut = a.x0 < -TOLERANCE_PX or a.y0 < -TOLERANCE_PX
        if cut or a.x1 > width + TOLERANCE_PX or a.y1 > height + TOLERANCE_PX:
            faults.append(f"{a.text!r} runs past the figure's edge")
    return faults
