"""A `tables.Table` as Markdown, LaTeX (booktabs) or CSV."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ablate.report.stats import MIN_SEEDS, Estimate
from ablate.report.tables import SIGNIFICANT, Table


def _num(x: float | None, digits: int = 3) -> str:
    """Fixed-point with `digits` decimals; small values in scientific notation (never a bare
    0.000 for a non-zero number), large ones as grouped integers."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    x = float(x)
    if x != 0 and abs(x) < 10 ** (-digits):
        return f"{x:.1e}"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def too_few(n: int) -> str:
    return f"n={n}: too few seeds for an interval"


def _estimate_text(value: Estimate, *, latex: bool, compact: bool = False) -> str:
    if not math.isfinite(value.value):
        return "–"
    if not (math.isfinite(value.low) and math.isfinite(value.high)):
        if 0 < value.n < MIN_SEEDS and not (latex or compact):
            return f"{_num(value.value)} ({too_few(value.n)})"
        return _num(value.value) + (f" (n={value.n})" if value.n < MIN_SEEDS else "")
    if latex:
        return f"{_num(value.value)} $\\pm$ {_num((value.high - value.low) / 2)}"
    return f"{_num(value.value)} [{_num(value.low)}, {_num(value.high)}]"


def _text(value: object, *, latex: bool = False, compact: bool = False) -> str:
    if isinstance(value, Estimate):
        return _estimate_text(value, latex=latex, compact=compact)
    if value is None:
        return "–"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return _num(float(value))
    return str(value)


def _cells(table: Table, row: dict, latex: bool) -> list[str]:
    significant = bool(row.get(SIGNIFICANT))
    out = []
    for col in table.columns:
        text = _text(row[col], latex=latex, compact=table.compact)
        if latex:
            text = _escape(text)
        if col == table.contrast_column and significant:
            text = f"\\textbf{{{text}}}$^*$" if latex else f"**{text}** *"
        out.append(text)
    return out


def _notes(table: Table) -> list[str]:
    notes = [f"{k} {v}" for k, v in table.marks.items()]
    if table.compact:
        notes.append(f"(n=k): only k < {MIN_SEEDS} seeds, too few for an interval: a mean only")
    return notes


def to_markdown(table: Table) -> str:
    if not table.rows:
        return f"*{table.caption}* (none)\n"
    lines = [f"**{table.caption}**", "", "| " + " | ".join(table.columns) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    for row in table.rows:
        cells = [c.replace("|", "\\|") for c in _cells(table, row, latex=False)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = _notes(table)
    return "\n".join(lines) + ("\n\n" + "; ".join(notes) + "\n" if notes else "\n")


_LATEX_SPECIAL = {
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "Δ": r"$\Delta$",
    "†": r"$^\dagger$",
    "¼": r"1/4",
    "^": r"\^{}",
    "–": "--",
    "ρ": r"$\rho$",
    "·": r"$\cdot$",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "×": r"$\times$",
    "−": "-",
    "±": r"$\pm$",
    "<": r"$<$",
    ">": r"$>$",
}


def _escape(text: str) -> str:
    for raw, escaped in _LATEX_SPECIAL.items():
        if raw == "^" and "$" in text:
            continue  # already math
        text = text.replace(raw, escaped)
    return text


def to_latex(table: Table) -> str:
    """A booktabs `table` float whose `tabular` has the same column count on every row."""
    if not table.rows:  # still a valid tabular: one column saying so
        table = Table(table.name, table.caption, [{"(none)": "no rows"}])
    cols = table.columns
    spec = "l" * min(3, len(cols)) + "r" * max(0, len(cols) - 3)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        f"\\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(_escape(c) for c in cols) + r" \\",
        r"\midrule",
    ]
    for row in table.rows:
        lines.append(" & ".join(_cells(table, row, latex=True)) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    notes = [f"{_escape(k) if k != '*' else '$^*$'}: {_escape(v)}" for k, v in table.marks.items()]
    notes += [_escape(n) for n in _notes(table)[len(table.marks) :]]
    caption = _escape(table.caption) + (" " + "; ".join(notes) + "." if notes else "")
    lines += [f"\\caption{{{caption}}}", f"\\label{{tab:{table.name}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


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
    to_frame(table).to_csv(paths[2], index=False)
    return paths


def to_html(table: Table) -> str:
    import html

    if not table.rows:
        return f"<p><em>{html.escape(table.caption)}</em> (none)</p>\n"
    head = "".join(f"<th>{html.escape(c)}</th>" for c in table.columns)
    body = []
    for row in table.rows:
        cells = []
        for text in _cells(table, row, latex=False):
            bold = text.startswith("**")
            text = html.escape(text.replace("**", ""))
            cells.append(f"<td><b>{text}</b></td>" if bold else f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    notes = _notes(table)
    foot = f"<p class='note'>{html.escape('; '.join(notes))}</p>" if notes else ""
    return (
        f"<table><caption>{html.escape(table.caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>{foot}\n"
    )
