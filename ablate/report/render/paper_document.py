"""`ablate report --paper`: `paper.tex`, a two-column `article` that reads as a results section
(the estimand and budget, the forest plot, the compact headline table) followed by the appendix
of `tables/paper.tex`, and, where pdflatex is installed, `paper.pdf` with the count of boxes
that ran past their width (0 is the contract `make test-latex` holds the export to)."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ablate.report.render import opening
from ablate.report.render.figures import caption
from ablate.report.render.latex_text import escape

#: The packages the export needs, all in TeX Live's `texlive-latex-base` and `-recommended`.
PREAMBLE = (
    "\\documentclass[twocolumn]{article}",
    "\\usepackage{booktabs}",
    "\\usepackage{graphicx}",
)
#: The log lines that mean a box ran past its width or height.
OVERFULL = ("Overfull \\hbox", "Overfull \\vbox")


def document(data, figures: list[Path]) -> str:
    """The paper's source: the results paragraphs, the forest plot (when there are contrasts to
    draw) at column width, and `tables/paper.tex`."""
    lines = [*PREAMBLE, "\\begin{document}", f"\\section*{{Results: {escape(data.name)}}}"]
    lines += [escape(paragraph) + "\n" for paragraph in opening.summary(data)]
    forest = next((p for p in figures if p.stem == "forest_plot"), None)
    if forest is not None:
        lines += [
            "\\begin{figure}[!htbp]",  # here, under its section, where it fits
            "\\centering",
            "\\includegraphics[width=\\columnwidth]{figures/forest_plot.pdf}",
            f"\\caption{{{escape(caption(forest))}.}}",
            "\\label{fig:forest}",
            "\\end{figure}",
        ]
    lines += ["\\input{tables/paper}", "\\end{document}"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Compiled:
    pdf: Path | None
    pages: int
    overfull: list[str]
    error: str = ""


def compile_pdf(tex: Path, timeout_s: float = 120.0) -> Compiled | None:
    """pdflatex `tex` twice (the second run resolves the table references) in its folder;
    None where pdflatex is not installed."""
    if shutil.which("pdflatex") is None:
        return None
    cmd = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name]
    for _ in range(2):
        done = subprocess.run(
            cmd, cwd=tex.parent, capture_output=True, text=True, timeout=timeout_s
        )
        if done.returncode != 0:
            break
    log = tex.with_suffix(".log").read_text(errors="replace")
    overfull = [line for line in log.splitlines() if line.startswith(OVERFULL)]
    pages = re.search(r"Output written on .*\((\d+) pages?", log)
    error = next((line for line in log.splitlines() if line.startswith("!")), "")
    if done.returncode != 0:
        return Compiled(None, 0, overfull, error or "pdflatex failed")
    return Compiled(tex.with_suffix(".pdf"), int(pages.group(1)) if pages else 0, overfull)


def write_paper(data, folder: Path, figures: list[Path]) -> Path:
    """folder/paper.tex beside the report's tables/ and figures/."""
    path = folder / "paper.tex"
    path.write_text(document(data, figures))
    return path
