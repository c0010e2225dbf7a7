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

from ablate.baselines import baseline
from ablate.report.data.table import Table
from ablate.report.render import formats, latex, paper
from ablate.report.render.tables import build_tables
from ablate.report.stats.inference import Estimate
from ablate.testing import study_data

DOCUMENT = (
    "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
    "\\input{%s}\n\\end{document}\n"
)
PROBLEMS = (
    "Overfull \\hbox",
    "Overfull \\vbox",
    "Float too large",
    "Unicode character",
    "Undefined control",
)


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


TWO_COLUMN = (
    "\\documentclass[twocolumn]{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
    "\\input{%s}\n\\end{document}\n"
)


def compile_two_column(tex: Path, workdir: Path) -> tuple[list[str], int]:
    """pdflatex `tex` in a two-column article (twice: references); its problems and pages."""
    doc = workdir / f"two_{tex.stem}.tex"
    doc.write_text(TWO_COLUMN % tex.resolve().as_posix())
    cmd = ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name]
    for _ in range(2):
        subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=120)
    log = doc.with_suffix(".log").read_text(errors="replace")
    problems = [line for line in log.splitlines() if line.startswith((*PROBLEMS, "!"))]
    problems += [line for line in log.splitlines() if line.startswith("Overfull \\vbox")]
    pages = re.search(r"Output written on .*\((\d+) pages?", log)
    return problems, int(pages.group(1)) if pages else 0


@requires_tex
def test_the_paper_export_fits_a_two_column_article_in_five_pages(tmp_path):
    # the compact headline in one column; the appendix (table*) at most 4 pages after page 1
    tex = tmp_path / "paper.tex"
    tex.write_text(paper.paper_tex(build_tables(wide_study()).tables))
    problems, pages = compile_two_column(tex, tmp_path)
    assert problems == []
    assert 2 <= pages <= 5


@requires_tex
def test_the_compile_check_fails_on_a_table_wider_than_a_column(tmp_path):
    # the same headline table set for a single-column page runs past a two-column article's
    # column: the check that guards the export sees it
    headline = next(t for t in build_tables(wide_study()).tables if t.name == "headline")
    tex = tmp_path / "wide.tex"
    tex.write_text(formats.to_latex(headline, latex.ONE_COLUMN).replace("\\small", "\\large"))
    problems, _ = compile_two_column(tex, tmp_path)
    assert any(p.startswith("Overfull \\hbox") for p in problems)


def test_the_paper_sets_the_headline_in_a_column_and_the_appendix_across_both():
    tex = paper.paper_tex(build_tables(wide_study()).tables)
    head, appendix = tex.split("\\section*{Appendix")
    assert head.count("\\begin{table}[!htbp]") == 1 and "\\footnotesize" in head
    assert "\\begin{table*}" not in head and "\\subsection" not in tex
    floats = re.findall(r"\\begin\{table\*\}.*?\\end\{table\*\}", appendix, re.S)
    assert [re.search(r"\\label\{tab:(\w+)\}", f).group(1) for f in floats if "label" in f] == [
        n for n in paper.APPENDIX_TABLES if f"tab:{n}" in appendix
    ]
    for body in floats:  # the heading is the caption's bold first words: never parted from it
        assert re.search(r"\\caption\{(\(continued\) )?\\textbf\{", body), body[:200]
    assert "\\texttt{tables/claims.tex}" in appendix  # the rest named by file


def test_an_interval_cell_stacks_its_estimate_over_its_interval_in_a_column():
    est = Estimate(-0.012, -0.035, 0.011, 5)
    table = Table("Δ [95% interval].", [{"arm": "gspo", "Δ pass@1": est}], name="t")
    narrow, wide = formats.to_latex(table, latex.COLUMN), formats.to_latex(table)
    assert "$-$0.012\\\\{}[$-$0.035, 0.011]" in narrow  # {}: the "[" is not \\'s argument
    assert "$-$0.012 [$-$0.035, 0.011]" in wide and "\\\\{}" not in wide
    assert latex.COLUMN.budget == pytest.approx(229.5 * 9 / 8)
    assert latex.COLUMN.column_sep == pytest.approx(8 * 9 / 8)


def _survival(diverged: int) -> Table:
    rows = [
        {"arm": a, "planned": 3, "finished": 3 - d, "diverged": d, "failed": 0}
        for a, d in (("grpo", 0), ("gspo", diverged))
    ]
    return Table("Trials per arm.", rows, name="survival", heading="Trials per arm")


def test_a_survival_table_of_zeros_is_one_sentence_in_the_paper():
    quiet = paper.paper_tex([_survival(0)])
    assert "All 6 planned trials finished" in quiet and "tab:survival" not in quiet
    lost = paper.paper_tex([_survival(1)])
    assert "tab:survival" in lost and "All 6 planned" not in lost
    empty = Table("Trials that did not finish.", [], name="incomplete")
    assert "tab:incomplete" not in paper.paper_tex([empty, _survival(1)])


@requires_tex
def test_the_paper_document_compiles_with_its_results_paragraph(tmp_path):
    from ablate.report.render.paper_document import compile_pdf, write_paper

    data = wide_study()
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "paper.tex").write_text(paper.paper_tex(build_tables(data).tables))
    done = compile_pdf(write_paper(data, tmp_path, []))
    assert done is not None and done.pdf is not None and done.pdf.exists()
    assert done.overfull == [] and 2 <= done.pages <= 5
    assert "Results:" in (tmp_path / "paper.tex").read_text()


def test_the_report_command_says_when_pdflatex_is_missing(tmp_path, monkeypatch):
    from ablate.commands import report as command

    monkeypatch.setattr(shutil, "which", lambda name: None)
    line, compiled = command._compiled(tmp_path / "paper.tex")
    assert "pdflatex not found" in line and "make test-latex" in line
    assert compiled  # no pdflatex: the .tex is the export, not a failure


@requires_tex
def test_a_paper_that_does_not_compile_is_a_failure_the_command_exits_on(tmp_path):
    from ablate.commands import report as command

    tex = tmp_path / "paper.tex"
    tex.write_text("\\documentclass{article}\\begin{document}a_b\\end{document}\n")
    line, compiled = command._compiled(tex)
    assert not compiled and "pdflatex failed" in line and "Missing $ inserted" in line


def test_the_report_command_exits_1_on_a_paper_that_did_not_compile_and_not_otherwise(capsys):
    import typer

    from ablate.commands import report as command

    command._exit_if_failed([])  # every paper compiled (or no pdflatex): nothing to say
    with pytest.raises(typer.Exit) as raised:
        command._exit_if_failed(["paper written to a/paper.tex; pdflatex failed: ! Missing $"])
    assert raised.value.exit_code == 1
    assert capsys.readouterr().err.startswith("error: paper written to a/paper.tex; pdflatex")
