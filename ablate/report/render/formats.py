"""A `Table` as Markdown, LaTeX (booktabs), CSV or HTML."""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ablate.report.data import numbers
from ablate.report.data.table import SIGNIFICANT, Table
from ablate.report.render import latex as tex
from ablate.report.stats.inference import MIN_SEEDS, Estimate


def _num(x: float | None) -> str:
    """A number alone in the report's style (`numbers.num`)."""
    return numbers.num(x)


def too_few(n: int) -> str:
    return f"n={n}: too few seeds for an interval"


def _estimate_text(
    value: Estimate, *, latex: bool, compact: bool = False, floor: float | None = None
) -> str:
    if not math.isfinite(value.value):
        return "–"
    if not (math.isfinite(value.low) and math.isfinite(value.high)):
        if 0 < value.n < MIN_SEEDS and not (latex or compact):
            return f"{_num(value.value)} ({too_few(value.n)})"
        return _num(value.value) + (f" (n={value.n})" if value.n < MIN_SEEDS else "")
    # the interval's two ends in every format: intervals clipped to a range, exact binomial and
    # Satterthwaite ones are asymmetric, and a "± half-width" would misstate them
    return numbers.estimate(value.value, value.low, value.high, floor=floor)


def _text(value: object, *, latex: bool = False, compact: bool = False, column: str = "") -> str:
    if isinstance(value, Estimate):
        floor = 0.0 if numbers.is_variance_column(column) else None
        return _estimate_text(value, latex=latex, compact=compact, floor=floor)
    if value is None:
        return "–"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return numbers.integer(int(value))
    if isinstance(value, float | np.floating):
        if numbers.is_p_column(column):
            return numbers.p_value(float(value))
        return _num(float(value))
    return str(value)


def _cells(table: Table, row: dict, latex: bool) -> list[str]:
    significant = bool(row.get(SIGNIFICANT))
    out = []
    for col in table.columns:
        text = _text(row[col], latex=latex, compact=table.compact, column=col)
        if col == table.contrast_column and significant and not latex:  # LaTeX: latex.py
            text = f"**{text}** *"
        out.append(text)
    return out


def _used_marks(table: Table) -> dict[str, str]:
    """The table's marks, if any row carries one (no legend for a mark nothing shows)."""
    return table.marks if any(row.get(SIGNIFICANT) for row in table.rows) else {}


def _notes(table: Table) -> list[str]:
    notes = [f"{k} {v}" for k, v in _used_marks(table).items()]
    if table.compact:
        notes.append(f"(n=k): only k < {MIN_SEEDS} seeds, too few for an interval: a mean only")
    return notes


def markdown_text(text: str) -> str:
    """`text` (an arm or model name, a sentence naming them) shown as itself in Markdown: no
    HTML tag or comment in it renders (a `<` that opens one is written `&lt;`; "k < 3" stays
    as it is), and no `|` ends a table cell."""
    return _TAG_OPEN.sub("&lt;", text).replace("|", "\\|")


#: A `<` that Markdown would pass on as HTML: it opens a tag, a closing tag, a comment or a
#: processing instruction.
_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")


def to_markdown(table: Table) -> str:
    caption = markdown_text(table.caption)
    if not table.rows:
        return f"*{caption}* (none)\n"
    lines = [f"**{caption}**", "", "| " + " | ".join(map(markdown_text, table.columns)) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    for row in table.rows:
        cells = [markdown_text(c) for c in _cells(table, row, latex=False)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [markdown_text(n) for n in _notes(table)]
    return "\n".join(lines) + ("\n\n" + "; ".join(notes) + "\n" if notes else "\n")


def to_latex(table: Table, layout: tex.Layout = tex.ONE_COLUMN, title: str = "") -> str:
    """A booktabs float that compiles with pdflatex and fits `layout`'s width (split into
    panels when it must be: `render.latex`); `title` opens its caption in bold."""
    if not table.rows:  # still a valid tabular: one column saying so
        table = Table(table.caption, [{"(none)": "no rows"}], name=table.name)
    cells = [_cells(table, row, latex=True) for row in table.rows]
    marks = _used_marks(table)
    notes = list(marks.items()) + [("", n) for n in _notes(table)[len(marks) :]]
    bold = [bool(row.get(SIGNIFICANT)) for row in table.rows]
    return tex.table_tex(
        table.name,
        table.columns,
        cells,
        table.caption,
        notes,
        table.contrast_column,
        bold,
        layout=layout,
        title=title,
    )


def to_frame(table: Table) -> pd.DataFrame:
    """Numbers, not text: each Estimate becomes `col`, `col low`, `col high`, `col N`."""
    out = []
    for row in table.rows:
        flat = {}
        for col, value in row.items():
            if col == SIGNIFICANT:
                flat["significant (Holm)"] = bool(value)
                continue
            if isinstance(value, Estimate):
                flat.update({col: value.value, f"{col} low": value.low, f"{col} high": value.high})
                flat[f"{col} N"] = value.n
            else:
                flat[col] = value
        out.append(flat)
    return pd.DataFrame(out)


def write_table(table: Table, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{table.name}.{ext}" for ext in ("md", "tex", "csv")]
    paths[0].write_text(to_markdown(table))
    paths[1].write_text(to_latex(table))
    csv_safe(to_frame(table)).to_csv(paths[2], index=False)
    return paths


#: A spreadsheet reads a cell starting with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """Each text cell a spreadsheet would run as a formula (an arm named `=HYPERLINK(...)`)
    quoted with a leading `'`, as spreadsheets themselves do; numbers, negative ones included,
    stay numbers."""

    def safe(value: object) -> object:
        if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
            return value
        try:
            float(value)
            return value  # "-0.5" read back as text stays a number to a spreadsheet
        except ValueError:
            return "'" + value

    text = [c for c in frame.columns if not pd.api.types.is_numeric_dtype(frame[c])]
    return frame.assign(**{c: frame[c].map(safe) for c in text}) if text else frame


#: `code` in a sentence or caption (an arm's name, a command).
_CODE = re.compile(r"`([^`]+)`")
#: A cell that is a number, an estimate with its interval, or a count: right-aligned in HTML.
NUMERIC = re.compile(r"^[\s\d.,eE+\-−–±()\[\]n=*<>/%×]*\d[\s\d.,eE+\-−–±()\[\]n=*<>/%×]*$")


def html_text(text: str) -> str:
    """`text` escaped for HTML, `code` spans rendered (no literal backticks)."""
    return _CODE.sub(r"<code>\1</code>", html.escape(text))


def _html_cell(text: str) -> str:
    bold = text.startswith("**")
    text = text.replace("**", "")
    shown = f"<b>{html_text(text)}</b>" if bold else html_text(text)
    return f"<td class='num'>{shown}</td>" if NUMERIC.match(text) else f"<td>{shown}</td>"


def to_html(table: Table) -> str:
    if not table.rows:
        return f"<p><em>{html_text(table.caption)}</em> (none)</p>\n"
    head = "".join(f"<th>{html_text(c)}</th>" for c in table.columns)
    body = []
    for row in table.rows:
        cells = [_html_cell(text) for text in _cells(table, row, latex=False)]
        body.append("<tr>" + "".join(cells) + "</tr>")
    notes = _notes(table)
    foot = f"<p class='note'>{html_text('; '.join(notes))}</p>" if notes else ""
    return (  # wrapped: a table wider than the page scrolls in its box, not the page
        f"<div class='scroll'><table><caption>{html_text(table.caption)}</caption><thead><tr>"
        f"{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{foot}\n"
    )
