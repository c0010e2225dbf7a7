"""A `Table` as LaTeX that compiles with pdflatex and booktabs alone and fits the text width of
a single-column article (345 pt at 10 pt, set in `\\small`).

Text is escaped once, from plain Unicode to ASCII LaTeX: special characters, `<`, `>` and `|` in
math mode, Greek letters and symbols as macros (the output is pure ASCII, so no Unicode error is
possible). A table wider than the page is split on purpose into panels stacked in one float, each
repeating the table's key columns (arm, base · template, …); long text columns wrap in `p{}`
columns sized as fractions of `\\linewidth`. Widths are estimated from the text (`text_width`),
and a test compiles every table of a report and checks that nothing runs past the text width.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

#: The text width the layout targets: a single-column article at 10 pt (pt).
TEXT_WIDTH = 345.0
#: Horizontal space LaTeX adds around each column (2 \tabcolsep).
COLUMN_SEP = 12.0
#: A column whose longest cell is wider than this wraps (pt at \small).
WRAP_ABOVE = 110.0
#: The narrowest a wrapped column gets (pt), and the most lines its longest cell should take.
WRAP_MIN = 70.0
WRAP_LINES = 3
#: The tallest one float may be (pt): a table taller than this is set as one float per panel
#: (a single-column article at 10 pt has about 550 pt of text height).
FLOAT_HEIGHT = 460.0
LINE_HEIGHT = 11.0  # \small's baseline skip
#: Leading columns repeated in every panel of a split table, when a table starts with them.
KEY_COLUMNS = ("arm", "replicate", "of", "claim", "model", "template", "base · template")

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "%": r"\%",
    "#": r"\#",
    "_": r"\_",
    "^": r"\^{}",
    "~": r"$\sim$",
    "<": "$<$",
    ">": "$>$",
    "|": "$|$",
}
_UNICODE = {
    "−": "$-$",
    "±": r"$\pm$",
    "×": r"$\times$",
    "·": r"$\cdot$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "≈": r"$\approx$",
    "≠": r"$\neq$",
    "→": r"$\rightarrow$",
    "←": r"$\leftarrow$",
    "∞": r"$\infty$",
    "√": r"$\surd$",
    "†": r"\dag{}",
    "‡": r"\ddag{}",
    "–": "--",
    "—": "---",
    "…": r"\ldots{}",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
    "¼": r"$\frac{1}{4}$",
    "½": r"$\frac{1}{2}$",
    "¾": r"$\frac{3}{4}$",
    "°": r"$^\circ$",
    "²": "$^2$",
    "³": "$^3$",
    "µ": r"$\mu$",
    "\u00a0": "~",
}
_GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "η": "eta",
    "θ": "theta", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu", "π": "pi", "ρ": "rho",
    "σ": "sigma", "τ": "tau", "φ": "phi", "χ": "chi", "ψ": "psi", "ω": "omega",
    "Γ": "Gamma", "Δ": "Delta", "Θ": "Theta", "Λ": "Lambda", "Π": "Pi", "Σ": "Sigma",
    "Φ": "Phi", "Ψ": "Psi", "Ω": "Omega",
}  # fmt: skip
_UNICODE.update({k: f"$\\{v}$" for k, v in _GREEK.items()})


def _char(ch: str) -> str:
    if ch in _SPECIAL:
        return _SPECIAL[ch]
    if ch.isascii():
        return ch
    if ch in _UNICODE:
        return _UNICODE[ch]
    # accented letters lose their accent (é -> e); anything else is shown as '?'
    base = "".join(c for c in unicodedata.normalize("NFKD", ch) if c.isascii())
    return base or "?"


def escape(text: str) -> str:
    """Plain Unicode text as ASCII LaTeX for text mode. `code` becomes \\texttt{code} and a
    'quoted' word gets an opening quote; adjacent math groups are merged ($a$$b$ -> $ab$)."""
    parts = re.split(r"`([^`]*)`", text)  # odd indexes: code spans
    out = []
    for i, part in enumerate(parts):
        part = re.sub(r"(^|(?<=[\s(]))'(?=\S)", "\x00", part)  # an opening single quote
        part = re.sub(r'(^|(?<=[\s(]))"(?=\S)', "\x01", part).replace('"', "\x02")
        body = "".join(_char(c) for c in part)
        body = body.replace("\x00", "`").replace("\x01", "``").replace("\x02", "''")
        out.append(f"\\texttt{{{body}}}" if i % 2 else body)
    return re.sub(r"(?<!\\)\$\$", "", "".join(out))


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

    @property
    def natural(self) -> float:
        return max((text_width(c) for c in self.cells), default=0.0)

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


def make_column(name: str, cells: list[str]) -> Column:
    filled = [c for c in cells if c.strip()]
    numeric = sum(bool(_NUMBER.match(c)) for c in filled) * 2 >= len(filled)  # most of them
    col = Column(name, cells, numeric)
    col.wraps = not numeric and col.natural > WRAP_ABOVE and any(" " in c for c in cells)
    col.width = col.minimum if col.wraps else max(col.natural, col.header_min)
    return col


def key_count(names: list[str]) -> int:
    """How many leading columns identify a row (repeated in every panel): at least one."""
    n = 0
    while n < len(names) - 1 and names[n] in KEY_COLUMNS:
        n += 1
    return max(n, 1)


def panels(columns: list[Column], budget: float = TEXT_WIDTH) -> list[list[Column]]:
    """The columns in panels that each fit `budget`: the key columns, then as many of the
    others, in order, as fit; wrapped columns then share out what is left up to their natural
    width. A column too wide on its own still gets a panel (with the keys)."""
    keys = columns[: key_count([c.name for c in columns])]
    rest = columns[len(keys) :]
    used_by_keys = sum(c.width + COLUMN_SEP for c in keys)
    out: list[list[Column]] = []
    current: list[Column] = []
    used = used_by_keys
    for col in rest:
        if col.wraps:  # never wider than a panel can hold
            col.width = min(col.width, max(WRAP_MIN, budget - used_by_keys - COLUMN_SEP))
        need = col.width + COLUMN_SEP
        if current and used + need > budget:
            out.append(current)
            current, used = [], used_by_keys
        current.append(col)
        used += need
    if current or not out:
        out.append(current)
    for panel in out:
        _widen(panel, budget - used_by_keys)
    return [keys + panel for panel in out]


def _widen(panel: list[Column], budget: float) -> None:
    """Share the room left in `panel` (keys excluded: they are shared by every panel) among its
    wrapped columns, up to their natural width."""
    left = budget - sum(c.width + COLUMN_SEP for c in panel)
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


def panel_height(panel: list[Column]) -> float:
    """Estimated height in pt of a panel: header, rows and rules."""
    rows = len(panel[0].cells) if panel else 0
    height = 0.0
    for i in range(rows):
        height += max(_lines(c.cells[i], c.width) if c.wraps else 1 for c in panel)
    header = max((_lines(c.name, c.width) for c in panel), default=1)
    return (height + header) * LINE_HEIGHT + 12.0


# --- output ----------------------------------------------------------------------------------
#: A cell holding an estimate with its interval: "0.512 [0.480, 0.544]".
_INTERVAL_CELL = re.compile(r"\[[^\]]*,[^\]]*\]")


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
    body = "\\\\".join(escape(line) for line in lines)
    return f"\\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}{body}\\end{{tabular}}"


def _spec(col: Column) -> str:
    if col.wraps:
        return f"p{{{col.width / TEXT_WIDTH:.3f}\\linewidth}}"
    return "r" if col.numeric else "l"


def _cell(col: Column, row: int, bold: bool) -> str:
    text = escape(col.cells[row])
    if bold:
        text = f"\\textbf{{{text}}}$^*$"
    return ("\\raggedright " + text) if col.wraps else text


def _tabular(panel: list[Column], bold_column: str, bold_rows: list[bool]) -> list[str]:
    end = r" \tabularnewline"
    lines = [f"\\begin{{tabular}}{{{''.join(_spec(c) for c in panel)}}}", r"\toprule"]
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
) -> str:
    """One booktabs `table` float: `rows` of plain-text cells under `columns`, in as many
    panels as the text width needs. `notes` are (mark, meaning) pairs; a cell of `bold_column`
    in a row flagged by `bold_rows` is set bold and marked *."""
    cols = [make_column(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    flags = bold_rows or [False] * len(rows)
    for col in cols:
        if col.name == bold_column and any(flags):  # bold is wider, and the mark follows
            col.width = col.width * 1.1 + 6
    intervals = any(_INTERVAL_CELL.search(cell) for row in rows for cell in row)
    text = escape(interval_caption(caption, intervals))
    marks = [f"{_mark(k)}{escape(v)}" for k, v in notes]
    text += " " + "; ".join(marks) + "." if marks else ""
    laid = panels(cols)
    tabulars = [_tabular(panel, bold_column, flags) for panel in laid]
    caption_height = LINE_HEIGHT * (1 + text_width(text) * 0.8 / TEXT_WIDTH)  # markup: 0.8
    if sum(map(panel_height, laid)) + caption_height + 12 * len(laid) <= FLOAT_HEIGHT:
        body = [line for i, t in enumerate(tabulars) for line in ([r"\par\medskip"] * bool(i) + t)]
        return _float(body, text, name)
    # too tall for one page: one float per panel, numbered as one table
    first = escape(caption.split(". ")[0].rstrip("."))
    parts = [_float(tabulars[0], text, name)]
    for tabular in tabulars[1:]:
        parts.append(_float(tabular, f"(continued) {first}.", None))
    return "".join(parts)


def _float(body: list[str], caption: str, label: str | None) -> str:
    head = [r"\begin{table}[tp]", r"\centering", r"\small"]
    if label is None:  # a continuation keeps the number of the table it continues
        tail = [r"\addtocounter{table}{-1}", f"\\caption{{{caption}}}"]
    else:
        tail = [f"\\caption{{{caption}}}", f"\\label{{tab:{label}}}"]
    return "\n".join([*head, *body, *tail, r"\end{table}"]) + "\n"
