"""A `Table` as LaTeX that compiles with pdflatex and booktabs alone and fits the width it is
set in (`Layout`): the text width of a single-column article (tables/<name>.tex), one column of
a two-column article (the paper's compact headline) or the full width of one (`table*`, the
paper's appendix).

Text is escaped once, to ASCII (`latex_text.escape`). A table wider than its layout is split on
purpose into panels stacked in one float, each repeating the table's key columns (arm,
base · template, …); long text columns wrap in `p{}` columns sized as fractions of
`\\linewidth`; in a narrow layout an interval cell stacks its estimate over its interval. Widths
are estimated from the text (`text_width`, in `\\small` points, scaled to the layout's type
size), and tests compile every table of a report and the paper export in a two-column article
and check that nothing runs past its width.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ablate.report.render.latex_text import escape, label

__all__ = [
    "COLUMN",
    "ONE_COLUMN",
    "SPREAD",
    "Layout",
    "escape",
    "interval_caption",
    "label",
    "table_tex",
]


@dataclass(frozen=True)
class Layout:
    """Where a table is set. Widths and heights in pt, measured in the 10 pt `article` class
    (letter paper): one column 345 wide; two columns 229.5 each, 469 in all; text 550 high."""

    width: float = 345.0
    env: str = "table"
    size: str = "\\small"
    scale: float = 1.0  # the type size over \small's 9 pt
    tabcolsep: float = 6.0
    line_height: float = 11.0  # the type size's baseline skip
    height: float = 460.0  # the tallest one float may be; taller: one float per panel
    stack: bool = False  # an interval cell as its estimate over [low, high]
    # where the float may go: a results-column table reads best where its text is ("h"),
    # else at a column's top, not above the section it belongs to
    placement: str = "tp"

    @property
    def budget(self) -> float:
        """The width in \\small points (the unit of `text_width`)."""
        return self.width / self.scale

    @property
    def column_sep(self) -> float:
        """The space around each column (2 \\tabcolsep), in \\small points."""
        return 2 * self.tabcolsep / self.scale


#: tables/<name>.tex: the text width of a single-column article, in \small.
ONE_COLUMN = Layout()
#: One column of a two-column article, in \footnotesize with narrower column gaps.
COLUMN = Layout(
    229.5, "table", "\\footnotesize", 8 / 9, 4.0, 9.5, 480.0, stack=True, placement="!htbp"
)
#: Both columns of a two-column article (`table*`), in \footnotesize.
SPREAD = Layout(469.0, "table*", "\\footnotesize", 8 / 9, 4.0, 9.5, 480.0)

#: A column whose longest cell is wider than this wraps (pt at \small).
WRAP_ABOVE = 110.0
#: The narrowest a wrapped column gets (pt), and the most lines its longest cell should take.
WRAP_MIN = 70.0
WRAP_LINES = 3
#: Leading columns repeated in every panel of a split table, when a table starts with them.
KEY_COLUMNS = ("arm", "replicate", "of", "claim", "model", "template", "base · template")
#: A cell holding an estimate with its interval: "0.512 [0.480, 0.544]".
_INTERVAL_CELL = re.compile(r"\[[^\]]*,[^\]]*\]")
_STACKABLE = re.compile(r"^(\S+) (\[[^\]]*,[^\]]*\])$")

# --- widths ----------------------------------------------------------------------------------
# Widths in pt of characters in \small (9 pt Computer Modern, T1), measured with \settowidth.
_WIDTHS = {
    2.6: ",'il.:;![]|",
    2.8: "fj",
    3.1: " -",
    3.6: "It()rs",
    4.1: "cze·",
    4.6: "ag0123456789/*?",
    4.9: "okqvxyρJ",
    5.15: "bdhnpuS",
    6.0: "ZLα–F",
    6.7: "EPBwCTΣR",
    7.0: "AHNUVXYDKOQG",
    7.2: "_=+@&<>≥≤≈",
    7.7: "m%#Δ",
    8.5: "M±×−W",
}
_WIDTH = {ch: w for w, chars in _WIDTHS.items() for ch in chars}


def text_width(text: str) -> float:
    """Estimated width in pt of `text` set in `\\small`, 3% on the wide side."""
    return 1.03 * sum(_WIDTH.get(ch, 7.0 if not ch.islower() else 4.9) for ch in text)


def _longest_word(text: str) -> float:
    return max((text_width(w) for w in text.split()), default=0.0)


@dataclass
class Column:
    name: str
    cells: list[str]
    numeric: bool
    wraps: bool = False
    width: float = 0.0  # content width in pt (a wrapped column's p{} width)
    stacked: bool = False  # interval cells set as the estimate over the interval

    @property
    def natural(self) -> float:
        return max((text_width(p) for c in self.cells for p in self.lines_of(c)), default=0.0)

    def lines_of(self, cell: str) -> list[str]:
        """The lines a cell is set on when nothing wraps it."""
        found = _STACKABLE.match(cell) if self.stacked else None
        return list(found.groups()) if found else [cell]

    @property
    def minimum(self) -> float:
        """Narrowest content width: a wrapped column down to its longest word (or WRAP_MIN)."""
        if not self.wraps:
            return max(self.natural, self.header_min)
        longest = max((_longest_word(c) for c in self.cells), default=0.0)
        return max(WRAP_MIN, longest, self.header_min, self.natural / WRAP_LINES)

    @property
    def header_min(self) -> float:
        return _longest_word(self.name)


_NUMBER = re.compile(r"^[\s\d.,eE+\-−–±()\[\]n=*<>/%]*$")


def make_column(name: str, cells: list[str], stack: bool = False) -> Column:
    filled = [c for c in cells if c.strip()]
    numeric = sum(bool(_NUMBER.match(c)) for c in filled) * 2 >= len(filled)  # most of them
    stacked = stack and numeric and any(_STACKABLE.match(c) for c in cells)
    col = Column(name, cells, numeric, stacked=stacked)
    col.wraps = not numeric and col.natural > WRAP_ABOVE and any(" " in c for c in cells)
    col.width = col.minimum if col.wraps else max(col.natural, col.header_min)
    return col


def key_count(names: list[str]) -> int:
    """How many leading columns identify a row (repeated in every panel): at least one."""
    n = 0
    while n < len(names) - 1 and names[n] in KEY_COLUMNS:
        n += 1
    return max(n, 1)


def panels(columns: list[Column], layout: Layout = ONE_COLUMN) -> list[list[Column]]:
    """The columns in panels that each fit `budget`: the key columns, then as many of the
    others, in order, as fit; wrapped columns then share out what is left up to their natural
    width. A column too wide on its own still gets a panel (with the keys)."""
    budget, sep = layout.budget, layout.column_sep
    keys = columns[: key_count([c.name for c in columns])]
    rest = columns[len(keys) :]
    used_by_keys = sum(c.width + sep for c in keys)
    out: list[list[Column]] = []
    current: list[Column] = []
    used = used_by_keys
    for col in rest:
        if col.wraps:  # never wider than a panel can hold
            col.width = min(col.width, max(WRAP_MIN, budget - used_by_keys - sep))
        need = col.width + sep
        if current and used + need > budget:
            out.append(current)
            current, used = [], used_by_keys
        current.append(col)
        used += need
    if current or not out:
        out.append(current)
    for panel in out:
        _widen(panel, budget - used_by_keys, sep)
    return [keys + panel for panel in out]


def _widen(panel: list[Column], budget: float, sep: float) -> None:
    """Share the room left in `panel` (keys excluded: they are shared by every panel) among its
    wrapped columns, up to their natural width."""
    left = budget - sum(c.width + sep for c in panel)
    wrapped = sorted((c for c in panel if c.wraps), key=lambda c: c.natural - c.width)
    for i, col in enumerate(wrapped):
        grow = max(0.0, min(left / (len(wrapped) - i), col.natural - col.width))
        col.width += grow
        left -= grow


def _lines(text: str, width: float) -> int:
    """Lines `text` takes wrapped at `width` (greedy, as LaTeX breaks a ragged-right cell)."""
    lines, current = 1, 0.0
    for word in text.split():
        w = text_width(word)
        if current and current + 3.1 + w > width:
            lines, current = lines + 1, w
        else:
            current += (3.1 if current else 0.0) + w
    return lines


def _cell_lines(col: Column, row: int) -> int:
    cell = col.cells[row]
    return _lines(cell, col.width) if col.wraps else len(col.lines_of(cell))


def panel_height(panel: list[Column], layout: Layout = ONE_COLUMN) -> float:
    """Estimated height in pt of a panel: header, rows and rules."""
    rows = len(panel[0].cells) if panel else 0
    height = sum(max(_cell_lines(c, i) for c in panel) for i in range(rows))
    header = max((_lines(c.name, c.width) for c in panel), default=1)
    return (height + header) * layout.line_height + 12.0


# --- output ----------------------------------------------------------------------------------


def interval_caption(caption: str, has_intervals: bool) -> str:
    """The caption as the LaTeX cells read: they show an interval as `estimate [low, high]`, its
    two ends (an interval clipped to a measure's range, an exact binomial or a Satterthwaite one
    is asymmetric, so a ± half-width would misstate it); a table with intervals whose caption
    does not name them gets a sentence that does."""
    if has_intervals and "interval" not in caption and "CI" not in caption:
        return caption + " Cells a [l, h]: estimate a with its 95% interval from l to h."
    return caption


def _header(col: Column) -> str:
    if col.wraps:
        return "\\raggedright " + escape(col.name)
    lines: list[str] = []
    for word in col.name.split():
        if lines and text_width(f"{lines[-1]} {word}") <= col.width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    if len(lines) <= 1:
        return escape(col.name)
    align = "r" if col.numeric else "l"
    body = "\\\\{}".join(escape(line) for line in lines)  # {}: a "[" is not \\'s argument
    return f"\\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}{body}\\end{{tabular}}"


def _spec(col: Column, layout: Layout) -> str:
    if col.wraps:
        return f"p{{{col.width / layout.budget:.3f}\\linewidth}}"
    return "r" if col.numeric else "l"


def _cell(col: Column, row: int, bold: bool) -> str:
    lines = [escape(line) for line in col.lines_of(col.cells[row])]
    if bold:
        lines = [f"\\textbf{{{line}}}" for line in lines]
        lines[0] += "$^*$"
    if len(lines) > 1:  # {} ends \\'s look for an optional [space] before the interval's "["
        align = "r" if col.numeric else "l"
        body = "\\\\{}".join(lines)
        return f"\\begin{{tabular}}[t]{{@{{}}{align}@{{}}}}{body}\\end{{tabular}}"
    return ("\\raggedright " + lines[0]) if col.wraps else lines[0]


def _tabular(
    panel: list[Column], bold_column: str, bold_rows: list[bool], layout: Layout
) -> list[str]:
    end = r" \tabularnewline"
    spec = "".join(_spec(c, layout) for c in panel)
    lines = [f"\\begin{{tabular}}{{{spec}}}", r"\toprule"]
    lines += [" & ".join(_header(c) for c in panel) + end, r"\midrule"]
    for i, bold in enumerate(bold_rows):
        cells = [_cell(c, i, bold and c.name == bold_column) for c in panel]
        lines.append(" & ".join(cells) + end)
    return [*lines, r"\bottomrule", r"\end{tabular}"]


def _mark(key: str) -> str:
    return "" if not key else "$^*$: " if key == "*" else f"{escape(key)}: "


def table_tex(
    name: str,
    columns: list[str],
    rows: list[list[str]],
    caption: str,
    notes: list[tuple[str, str]],
    bold_column: str = "",
    bold_rows: list[bool] | None = None,
    *,
    layout: Layout = ONE_COLUMN,
    title: str = "",
) -> str:
    """One booktabs float: `rows` of plain-text cells under `columns`, in as many panels as
    `layout`'s width needs. `notes` are (mark, meaning) pairs; a cell of `bold_column` in a row
    flagged by `bold_rows` is set bold and marked *. A `title` opens the caption in bold: a
    heading inside the float cannot be parted from its table, as a sectioning command can."""
    cols = [make_column(c, [r[i] for r in rows], layout.stack) for i, c in enumerate(columns)]
    flags = bold_rows or [False] * len(rows)
    for col in cols:
        if col.name == bold_column and any(flags):  # bold is wider, and the mark follows
            col.width = col.width * 1.1 + 6
    intervals = any(_INTERVAL_CELL.search(cell) for row in rows for cell in row)
    text = escape(interval_caption(caption, intervals))
    marks = [f"{_mark(k)}{escape(v)}" for k, v in notes]
    text += " " + "; ".join(marks) + "." if marks else ""
    head = f"\\textbf{{{escape(title.rstrip('.'))}.}} " if title else ""
    laid = panels(cols, layout)
    tabulars = [_tabular(panel, bold_column, flags, layout) for panel in laid]
    caption_lines = 1 + text_width(title + text) * 0.8 / layout.budget  # markup: 0.8
    tall = sum(panel_height(p, layout) for p in laid) + 12 * len(laid)
    if tall + caption_lines * layout.line_height <= layout.height:
        body = [line for i, t in enumerate(tabulars) for line in ([r"\par\medskip"] * bool(i) + t)]
        return _float(body, head + text, name, layout)
    # too tall for one page: one float per panel, numbered as one table
    first = head or escape(caption.split(". ")[0].rstrip(".")) + ". "
    parts = [_float(tabulars[0], head + text, name, layout)]
    for tabular in tabulars[1:]:
        parts.append(_float(tabular, f"(continued) {first.strip()}", None, layout))
    return "".join(parts)


def _float(body: list[str], caption: str, name: str | None, layout: Layout) -> str:
    env = layout.env
    head = [f"\\begin{{{env}}}[{layout.placement}]", r"\centering", layout.size]
    if layout.tabcolsep != ONE_COLUMN.tabcolsep:  # local to the float's group
        head.append(f"\\setlength{{\\tabcolsep}}{{{layout.tabcolsep:g}pt}}")
    if name is None:  # a continuation keeps the number of the table it continues
        tail = [r"\addtocounter{table}{-1}", f"\\caption{{{caption}}}"]
    else:
        tail = [f"\\caption{{{caption}}}", f"\\label{{tab:{label(name)}}}"]
    return "\n".join([*head, *body, *tail, f"\\end{{{env}}}"]) + "\n"
