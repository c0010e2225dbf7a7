"""A `tables.Table` as Markdown, LaTeX (booktabs) or CSV."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ablate.report.stats import Estimate
from ablate.report.tables import Table

P_COLUMNS = ("p", "p Holm", "p per-problem")


def _num(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{x:.{digits}g}" if abs(x) >= 1000 else f"{x:.{digits}f}"


def _text(value: object, *, latex: bool = False) -> str:
    if isinstance(value, Estimate):
        if not math.isfinite(value.value):
            return "–"
        if latex and math.isfinite(value.low):
            half = (value.high - value.low) / 2
            return f"{_num(value.value)} $\\pm$ {_num(half)} (N={value.n})"
        ci = f" [{_num(value.low)}, {_num(value.high)}]" if math.isfinite(value.low) else ""
        return f"{_num(value.value)}{ci} (N={value.n})"
    if value is None:
        return "–"
    if isinstance(value, float | np.floating):
        return _num(float(value))
    return str(value)


def _marks(row: dict, latex: bool) -> str:
    """Significance marks for a row's contrast (explained in the table's footnote)."""
    out = ""
    if isinstance(row.get("p Holm"), float) and row["p Holm"] < 0.05:
        out += "$^*$" if latex else "*"
    if isinstance(row.get("p per-problem"), float) and row["p per-problem"] < 0.05:
        out += r"$^\dagger$" if latex else "†"
    return out


def _best(table: Table) -> dict[str, float]:
    best = {}
    for col in table.higher_is_better:
        values = [r[col].value for r in table.rows if isinstance(r.get(col), Estimate)]
        values = [v for v in values if math.isfinite(v)]
        if values:
            best[col] = max(values)
    return best


def _cells(table: Table, row: dict, latex: bool) -> list[str]:
    best, out = _best(table), []
    for col in table.columns:
        text = _text(row[col], latex=latex)
        if latex:
            text = _escape(text)
        if col in best and isinstance(row[col], Estimate) and row[col].value == best[col]:
            text = f"\\textbf{{{text}}}" if latex else f"**{text}**"
        if col == "Δ pass@1 vs ref":
            text += _marks(row, latex)
        out.append(text)
    return out


def to_markdown(table: Table) -> str:
    if not table.rows:
        return f"*{table.caption}* (none)\n"
    lines = [f"**{table.caption}**", "", "| " + " | ".join(table.columns) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    for row in table.rows:
        cells = [c.replace("|", "\\|") for c in _cells(table, row, latex=False)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"{k} {v}" for k, v in table.marks.items()]
    if table.higher_is_better:
        notes.append("bold: best mean in the column")
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
    if table.higher_is_better:
        notes.append("bold: best mean in the column")
    caption = _escape(table.caption) + (" " + "; ".join(notes) + "." if notes else "")
    lines += [f"\\caption{{{caption}}}", f"\\label{{tab:{table.name}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_frame(table: Table) -> pd.DataFrame:
    """Numbers, not text: each Estimate becomes `col`, `col low`, `col high`, `col N`."""
    out = []
    for row in table.rows:
        flat = {}
        for col, value in row.items():
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
    notes = [f"{k} {v}" for k, v in table.marks.items()]
    foot = f"<p class='note'>{html.escape('; '.join(notes))}</p>" if notes else ""
    return (
        f"<table><caption>{html.escape(table.caption)}</caption><thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>{foot}\n"
    )
