"""LaTeX tables: escaping to ASCII, panels that fit the text width, and every table of a report
compiled with pdflatex in a minimal article with booktabs (skipped where no TeX is installed;
`make test-latex` installs it, and there ABLATE_REQUIRE_TEX=1 turns the skip into a failure)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ablate.factors.presets import baseline
from ablate.report.data.table import Table
from ablate.report.render import formats, latex, paper
from ablate.report.render.tables import build_tables
from ablate.report.stats.inference import Estimate
from ablate.testing import study_data

DOCUMENT = (
    "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
    "\\input{%s}\n\\end{document}\n"
)
PROBLEMS = ("Overfull \\hbox", "Float too large", "Unicode character", "Undefined control")


def tex_available() -> bool:
    if shutil.which("pdflatex") and shutil.which("kpsewhich"):
        found = subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True)
        return bool(found.stdout.strip())
    return False


requires_tex = pytest.mark.skipif(
    not tex_available() and os.environ.get("ABLATE_REQUIRE_TEX") != "1",
    reason="pdflatex with booktabs not installed (make test-latex installs it)",
)


def compile_problems(table: Path, workdir: Path) -> list[str]:
    """pdflatex `table` in a minimal article; the log lines that say it failed or ran past the
    text width (or the page), with the error when it did not compile."""
    doc = workdir / f"doc_{table.stem}.tex"
    doc.write_text(DOCUMENT % table.resolve().as_posix())
    cmd = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name]
    done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=120)
    log = doc.with_suffix(".log").read_text(errors="replace")
    problems = [line for line in log.splitlines() if line.startswith(PROBLEMS)]
    if done.returncode != 0:
        problems += [line for line in log.splitlines() if line.startswith("!")] or ["failed"]
    return problems


REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
ALGOS = {
    "grpo": REF,
    "clip_higher_and_overlong": dataclasses.replace(REF, clip_high=0.28, overlong_buffer=4),
    "dr_grpo_like": dataclasses.replace(REF, scale="none", loss_agg="seq_mean_token_sum_norm"),
    "dapo": baseline("dapo"),
    "gspo": dataclasses.replace(baseline("gspo"), minibatches=4),
}


def wide_study():
    """Five arms with long names and changes, two base models, three seeds; one diverged."""
    runs = []
    for i, arm in enumerate(ALGOS):
        for model in ("rl_ready", "saturated"):
            for seed in range(3):
                curves = {
                    "eval/pass_at_1": {0: 0.5, 10: 0.5 + 0.02 * i + 0.01 * seed},
                    "eval/pass_at_8": {0: 0.8, 10: 0.85},
                    "budget/generated_tokens": {10: 10_000 + 100 * seed},
                    "entropy/mean": [0.5, 0.45, 0.4],
                    "length/incorrect_mean": [10, 11, 12],
                }
                diverged = arm == "dapo" and model == "saturated" and seed == 2
                runs.append((arm, model, seed, curves, "diverged" if diverged else "finished"))
    return study_data(runs, algorithms=ALGOS, reference="grpo")


@pytest.fixture(scope="module")
def wide_tables(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("tables")
    for table in build_tables(wide_study()).tables:
        formats.write_table(table, folder)
    return sorted(folder.glob("*.tex"))


def test_text_is_escaped_to_ascii_latex():
    assert latex.escape("p < 0.05") == "p $<$ 0.05"
    assert latex.escape("|Δ pass@1|") == r"$|\Delta$ pass@1$|$"  # adjacent math merged
    assert latex.escape("arm − reference ± 0.1") == r"arm $-$ reference $\pm$ 0.1"
    assert latex.escape("α = 0.05, ρ") == r"$\alpha$ = 0.05, $\rho$"
    assert latex.escape("a_b & 5% #1 $ {x} \\") == r"a\_b \& 5\% \#1 \$ \{x\} \textbackslash{}"
    assert latex.escape("`grpo` is 'supported'") == r"\texttt{grpo} is `supported'"
    assert latex.escape("last ¼, ~0, é, ✓").isascii()


def test_cells_print_an_interval_as_its_two_ends_not_plus_minus():
    # a clipped or exact binomial interval is asymmetric: "± half-width" would misstate it
    est = Estimate(0.98, 0.95, 1.0, 5)
    table = Table("pass@1: mean over seeds [95% Student-t interval].", [{"arm": "a", "x": est}])
    tex = formats.to_latex(table)
    assert "0.980 [0.950, 1.000]" in tex and r"\pm" not in tex
    assert "[95\\% Student-t interval]" in tex  # the caption is left as it reads
    assert "half-width" not in latex.interval_caption("Claims.", True)
    assert "estimate a with its 95% interval from l to h" in latex.interval_caption("Claims.", True)
    assert latex.interval_caption("Claims.", False) == "Claims."
    assert latex.make_column("x", ["0.980 [0.950, 1.000]", "–"]).numeric  # right-aligned


def test_a_wide_table_is_split_into_panels_that_repeat_the_key_columns():
    rows = [
        {"arm": f"arm{i}", "base · template": "rl_ready · plain"}
        | {f"measure {j}": f"0.{i}{j}0 [0.{i}{j}0, 0.{i}{j}9]" for j in range(12)}
        for i in range(3)
    ]
    tex = formats.to_latex(Table("Wide [95% t interval].", rows, name="wide"))
    specs = re.findall(r"\\begin\{tabular\}\{([^}]*)\}", tex)
    assert len(specs) >= 3 and all(s.startswith("ll") for s in specs)  # arm, base · template
    assert tex.count("arm0 &") == len(specs)
    for measure in range(12):
        assert len(re.findall(rf"measure {measure}(?!\d)", tex)) == 1
    assert "Wide [95\\% t interval]." in tex and "half-width" not in tex


def test_long_text_wraps_in_columns_sized_to_the_line_width():
    long = "with std scaling and per-sequence length normalisation, answers grow longer " * 2
    rows = [{"claim": "1", "statement": long, "verdict": "inconclusive"}]
    tex = formats.to_latex(Table("Claims.", rows, name="claims"))
    widths = [float(w) for w in re.findall(r"p\{([\d.]+)\\linewidth\}", tex)]
    assert widths and sum(widths) < 1.0


@requires_tex
def test_every_table_of_a_report_compiles_and_fits_the_text_width(wide_tables, tmp_path):
    stems = {"main", "claims", "dynamics", "configuration", "outcomes", "survivors"}
    assert {p.stem for p in wide_tables} >= stems
    for table in wide_tables:
        assert compile_problems(table, tmp_path) == [], table.name
    main = (tmp_path / "doc_main.log").read_text()
    assert "Output written" in main  # a PDF came out


def test_the_compact_headline_table_is_one_panel_even_with_long_arm_names(wide_tables):
    headline = next(p for p in wide_tables if p.stem == "headline").read_text()
    assert headline.count(r"\begin{tabular}{") == 1  # one panel (a header cell is a tabular[b])
    assert "arm (base)" in headline and "clip\\_higher\\_and\\_overlong (saturated)" in headline
    for column in (r"$\Delta$ pass@1", "verdict", "(Holm)"):
        assert column in headline


@requires_tex
def test_the_paper_tables_compile_with_their_headings(tmp_path):
    tex = tmp_path / "paper.tex"
    tex.write_text(paper.paper_tex(build_tables(wide_study()).tables))
    assert compile_problems(tex, tmp_path) == []
    assert "Output written" in (tmp_path / "doc_paper.log").read_text()


@requires_tex
def test_the_compile_check_catches_what_does_not_fit(tmp_path):
    wide = tmp_path / "wide.tex"
    cells = " & ".join(["0.123 $\\pm$ 0.045"] * 12)
    spec = "r" * 12
    wide.write_text(
        f"\\begin{{tabular}}{{{spec}}}\\toprule {cells} \\\\ \\bottomrule\\end{{tabular}}\n"
    )
    assert any("Overfull \\hbox" in p for p in compile_problems(wide, tmp_path))
    unicode = tmp_path / "unicode.tex"
    unicode.write_text("p − 0.05\n")
    assert compile_problems(unicode, tmp_path)
