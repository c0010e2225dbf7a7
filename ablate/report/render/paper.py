"""The tables as a paper wants them (`tables/paper.tex`, which `\\input`s into a two-column
paper as it is: each table once, no preamble): one compact headline table (arm, Δ [interval],
p (Holm), verdict) that fits one column in one panel, then an appendix of the tables a reviewer
checks a verdict against (`APPENDIX_TABLES`), across both columns, each under a heading written
for people; the report's other tables are named by file (each compiles on its own)."""

from __future__ import annotations

from ablate.report.data.load import StudyData
from ablate.report.data.table import SIGNIFICANT, Table, TableSpec
from ablate.report.render import configuration, formats, latex
from ablate.report.stats import contrasts as cx


def varying(rows: list[cx.ContrastRow]) -> str:
    """What of the rows' cells varies: "", "base", "template" or "base · template"."""
    models, templates = len({r.model for r in rows}) > 1, len({r.template for r in rows}) > 1
    return " · ".join(["base"] * models + ["template"] * templates)


def _cell_text(r: cx.ContrastRow, what: str) -> str:
    """The arm, with the parts of its cell that vary between rows in brackets: one wrapping
    column instead of two keeps the table one panel wide in a single column."""
    parts = [r.model] * ("base" in what) + [r.template] * ("template" in what)
    return f"{r.arm} ({' · '.join(parts)})" if parts else r.arm


def headline_rows(data: StudyData) -> list[dict]:
    """One row per contrast of the primary family, in the main table's order."""
    rows = cx.primary_contrasts(data)
    what = varying(rows)
    out = []
    for r in rows:
        row = {f"arm ({what})" if what else "arm": _cell_text(r, what), "Δ pass@1": r.contrast.diff}
        row |= {"p (Holm)": r.p_holm, "verdict": r.verdict or "–"}
        out.append(row | {SIGNIFICANT: r.significant})
    return out


def headline_table(data: StudyData) -> Table:
    rows = cx.primary_contrasts(data)
    cells, what = sorted({r.cell for r in rows}), varying(rows)
    where = f" on {cells[0]}" if len(cells) == 1 else f", {what} in brackets"
    family = max((r.family for r in rows), default=0)
    at = "at equal generated tokens" if data.primary == cx.TOKENS else "at the final eval"
    margin = f"±{data.margin:g}" if data.margin else "a margin (none declared)"
    full = "contrasts at equal tokens" if data.primary == cx.TOKENS else "final pass@1"
    caption = (
        f"Δ eval pass@1 {at}, arm − reference ({data.reference_arm}){where}, paired by seed "
        f"[95% interval]; p Holm-adjusted over the family's {family} tests; verdict: different "
        f"(Holm p < 0.05), equivalent (90% interval inside {margin}) or inconclusive. The "
        f"appendix's full table of {full} gives each arm's pass@1, seeds and power. Setting: "
        f"{configuration.setting_text(data)}."
    )
    marks = {"*": "verdict different"}
    return Table(caption, headline_rows(data), marks, contrast_column="Δ pass@1")


def has_contrasts(data: StudyData) -> bool:
    return bool(cx.primary_contrasts(data))


TABLES = (TableSpec(name="headline", build=headline_table, applies=has_contrasts),)

APPENDIX = "Appendix: tables behind the verdicts"
#: The appendix's tables, in this order: the arms, the verdicts in full, the controls that
#: certify them, the secondary reading at equal tokens, the variance budget, and trials lost.
APPENDIX_TABLES = (
    "configuration",
    "main",
    "controls",
    "equal_tokens",
    "variance_budget",
    "survival",
    "incomplete",
)
#: Columns of the survival table that count trials lost or stopped early.
_LOST = ("diverged", "saturated", "failed", "missing / unfinished")


def _says_something(table: Table) -> bool:
    """False for a table with no rows, and for a survival table in which every trial finished
    (rows of zeros: the appendix says so in one sentence instead)."""
    if not table.rows:
        return False
    if table.name == "survival":
        return any(row.get(c) for row in table.rows for c in _LOST)
    return True


def _closing(tables: list[Table], shown: set[str]) -> str:
    survival = next((t for t in tables if t.name == "survival"), None)
    parts = []
    if survival is not None and survival.rows and "survival" not in shown:
        n = sum(int(row.get("planned", 0)) for row in survival.rows)
        parts.append(f"All {n:,} planned trials finished: none diverged, saturated or failed.")
    others = [t for t in tables if t.name not in shown and t.name != "headline" and t.rows]
    if others:
        named = "; ".join(_file_ref(t) for t in others)
        parts.append(f"The report's further tables, each a file that compiles on its own: {named}.")
    return "\n\n".join(parts)


def _file_ref(table: Table) -> str:
    """'Title (tables/name.tex)', both escaped: table names hold `_` (took_effect,
    robustness_recipes, ...), which outside math mode stops pdflatex ("Missing $ inserted")."""
    path = latex.escape(f"tables/{table.name}.tex")
    return f"{latex.escape(table.title)} (\\texttt{{{path}}})"


def paper_tex(tables: list[Table]) -> str:
    """For a two-column article: the compact headline table in one column (`latex.COLUMN`),
    then the appendix's tables across both (`table*`, `latex.SPREAD`), each heading the bold
    first words of its caption so that no page break parts them."""
    lines = ["% Generated by ablate: \\input{tables/paper} in a two-column article with booktabs."]
    for table in (t for t in tables if t.name == "headline"):
        lines.append(formats.to_latex(table, latex.COLUMN))
    by_name = {t.name: t for t in tables}
    shown = [by_name[n] for n in APPENDIX_TABLES if n in by_name and _says_something(by_name[n])]
    lines.append(f"\\section*{{{latex.escape(APPENDIX)}}}")
    lines.append(" ".join(_latex_refs(shown)))
    for table in shown:
        lines.append(formats.to_latex(table, latex.SPREAD, title=table.title))
    lines.append(_closing(tables, {t.name for t in shown}))
    return "\n".join(line for line in lines if line) + "\n"


def _latex_refs(shown: list[Table]) -> list[str]:
    if not shown:
        return []
    refs = ", ".join(f"\\ref{{tab:{latex.label(t.name)}}}" for t in shown)
    return [f"Tables {refs} give the arms, the verdicts in full and what they rest on."]
