"""Every study-derived name that reaches `ablate report --paper`'s LaTeX is escaped (issue 63:
table names with `_` in the paper's closing paragraph stopped pdflatex with "Missing $
inserted"). The names are the shipped studies' own (arms, study, base models, templates, recipe
templates, findings) and adversarial ones; the paper's pieces built from them must pass a
TeX-safety check (`tex_problems`), and, where pdflatex is installed, compile."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import warnings
from functools import cache
from pathlib import Path

import pytest

from ablate.base.errors import StudyError
from ablate.baselines import baseline
from ablate.report.data.table import Table
from ablate.report.render import latex_text, paper
from ablate.report.render.latex_text import escape, label
from ablate.report.render.paper_document import compile_pdf, document
from ablate.report.render.sections import SECTIONS
from ablate.report.render.tables import TABLES, build_tables
from ablate.study import load_study
from ablate.testing import study_data

STUDIES = Path(__file__).resolve().parents[1] / "studies"
#: Names a user may well write: each LaTeX special character, a blank line, a control character.
ADVERSARIAL = (
    "vllm_tis",
    "a&b",
    "50%",
    "grpo[scale='none']",
    "#1 arm",
    "cost $5",
    "{braced}",
    "~tilde",
    "x^2",
    "back\\slash",
    "two\n\nparagraphs",
    "bell\x07",
    "[starts] with a bracket",
)
#: The studies the issue names: their reports must compile.
NAMED = ("offpolicy", "fair_comparison")


@cache
def shipped_names() -> dict[str, frozenset[str]]:
    """study name -> every name it declares that a report prints. A study that does not load
    here (the GPU template wants local files) is left out; the ones the issue names must load."""
    out = {}
    for path in sorted(STUDIES.glob("*.py")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                study = load_study(path)
            except StudyError:
                continue
        names = {study.name, *study.base_models, *study.templates}
        names |= {a.name for a in study.arms}
        names |= set((study.passk and study.passk.templates) or ())
        recipes = study.eval.robustness
        names |= set(recipes.templates) if recipes else set()
        for f in study.findings:
            names |= {f.id, f.arm, f.reference, f.model, f.template, f.statement, f.paper}
        out[study.name] = frozenset(names)
    assert set(NAMED) <= set(out), sorted(out)
    return out


def all_names() -> list[str]:
    return sorted(set().union(*shipped_names().values()) | set(ADVERSARIAL))


# --- the TeX-safety check ---------------------------------------------------------------------
#: A control word (\texttt, \section*) or control symbol (\_, \%, \\, \{).
_COMMAND = re.compile(r"\\(?:[A-Za-z]+\*?|[^A-Za-z])")
_MATH = re.compile(r"\$[^$]*\$")
#: A cross-reference's key or a file's path: \label{tab:equal_tokens}, \input{tables/paper}.
_KEY = re.compile(r"\\(?:label|ref|input|includegraphics(?:\[[^\]]*\])?)\{([^}]*)\}")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
#: Characters that are special in text mode: each is an error or a surprise there.
_SPECIAL = set("_^#%$\\~")
#: The commands the paper is written with: its structure's, and those `escape` writes. Any other
#: is a name's backslash read as a command ("Undefined control sequence").
_STRUCTURE = """documentclass usepackage begin end section caption label ref input includegraphics
columnwidth centering small footnotesize setlength tabcolsep addtocounter toprule midrule
bottomrule tabularnewline raggedright linewidth par medskip texttt textbf"""
_KNOWN = {
    *_STRUCTURE.split(),
    *(
        c
        for t in [*latex_text._SPECIAL.values(), *latex_text._UNICODE.values()]
        for c in re.findall(r"\\([A-Za-z]+)", t)
    ),
}


#: A `{` that opens no command's argument: generated braces follow a command (here \x1a), a
#: brace, `@` (in @{}) or `]` (an optional argument); a name's `{` follows text.
_TEXT_BRACE = re.compile(r"(?<=[^\x1a{}@\]])\{")
#: A tabular's column spec (p{0.3\linewidth}...): written from numbers, it holds no name.
_SPEC = re.compile(r"^\\begin\{tabular\}\{[^ ]*\}$")


def _brace_problem(line: str) -> str:
    """What is wrong with the braces of `line` (its commands replaced by \x1a), or ""."""
    depth = 0
    for ch in line:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            return "a } closes nothing"
    if depth:
        return "a { left open"
    return "a { in text" if _TEXT_BRACE.search(line) else ""


def tex_problems(tex: str) -> list[str]:
    """The lines of generated LaTeX with text-mode specials outside a command or math mode, an
    unbalanced $ or brace, an `&` outside a table row, or a non-ASCII character. Every
    generated construct is on one line (`escape` keeps text on one line), so lines are checked
    one at a time; a line starting with % is the generator's own comment."""
    problems = []
    for line in tex.splitlines():
        if line.startswith("%"):
            continue
        keys = _KEY.findall(line)  # never typeset: a key only has to end where its brace does
        said = [f"key {k!r}" for k in keys if not re.fullmatch(r"[A-Za-z0-9_:./\-]+", k)]
        bare = _COMMAND.sub("\x1a", _KEY.sub("\x1a", line))
        said += [p for p in [_brace_problem(bare)] if p and not _SPEC.match(line)]
        words = {c[1:].rstrip("*") for c in _COMMAND.findall(line) if c[1:2].isalpha()}
        unknown = sorted(words - _KNOWN)
        said += [f"unknown command \\{unknown[0]}"] if unknown else []
        if bare.count("$") % 2:
            said.append("an odd number of $")
        bare = _MATH.sub(" ", bare)
        said += [f"raw {c!r}" for c in sorted(_SPECIAL & set(bare))]
        if "&" in bare and not line.endswith("\\tabularnewline"):
            said.append("raw '&'")
        said += ["not ASCII"] * (not line.isascii())
        said += ["a control character"] * bool(_CONTROL.search(_COMMAND.sub(" ", line)))
        problems += [f"{'; '.join(said)}: {line[:160]}"] if said else []
    return problems


def test_the_check_sees_every_special_character_left_raw():
    # the check could fail: each adversarial name written as it is, and the closing paragraph's
    # old form, are caught
    for name in ADVERSARIAL:
        if set(name) & (_SPECIAL | set("&{}\x07")):
            assert tex_problems(f"The arm {name} wins."), name
    assert tex_problems("Took effect? (\\texttt{tables/took_effect.tex}).")
    assert tex_problems("\\caption{two\n\n}")  # a blank line leaves the brace open
    assert tex_problems("$\\sim$ and $") and not tex_problems("a\\_b $<$ c \\{d\\}")


def test_every_shipped_and_adversarial_name_escapes_to_safe_one_line_tex():
    for name in all_names():
        text = escape(name)
        assert tex_problems(f"\\section*{{Results: {text}}}") == [], (name, text)
        assert "\n" not in text, name  # a blank line inside a caption or cell is an error
        assert re.fullmatch(r"[A-Za-z0-9_:.\-]+", label(name)), name


def _further_tables() -> list[Table]:
    """One table per registered name under its section heading, plus tables named and headed
    by the adversarial names; rows of the shipped arm names."""
    # a header set on lines "n", "[per", "arm]": a "[" after \\ must not be its argument
    rows = [{"arm": name, "n [per arm]": i} for i, name in enumerate(all_names())]
    headings = {s.name: s.heading for s in SECTIONS}
    tables = [Table(f"{s.name}.", rows, name=s.name, heading=headings[s.name]) for s in TABLES]
    return tables + [Table(f"{n}.", rows, name=n, heading=n) for n in ADVERSARIAL]


def test_the_closing_paragraph_names_every_further_table_escaped():
    tables = _further_tables()
    tex = paper.paper_tex(tables)
    assert tex_problems(tex) == []
    closing = tex.splitlines()[-1]
    assert closing.startswith("The report's further tables")
    for name in ("took_effect", "robustness_recipes", "compute_curve_contrasts", "vllm_tis"):
        assert f"\\texttt{{{escape(f'tables/{name}.tex')}}}" in closing, name
    assert "\\texttt{tables/took\\_effect.tex}" in closing  # as pdflatex needs it
    labels = re.findall(r"\\label\{tab:([^}]*)\}", tex)
    refs = re.findall(r"\\ref\{tab:([^}]*)\}", tex)
    assert labels and set(refs) <= set(labels)  # every reference finds its table


def named_study(arms: list[str], name: str = "off_policy & fair #1"):
    """A StudyData whose arms, base model and study carry the given names: three seeds each,
    the first arm the reference."""
    ref = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
    runs = []
    for i, arm in enumerate(arms):
        for model in ("rl_ready_v2 & 50%",):  # one base model: the arms' names are the point
            for seed in range(3):
                curves = {
                    "eval/pass_at_1": {0: 0.5, 10: 0.5 + 0.01 * (i % 5) + 0.01 * seed},
                    "budget/generated_tokens": {10: 10_000 + 100 * seed},
                }
                runs.append((arm, model, seed, curves))
    data = study_data(runs, algorithms=dict.fromkeys(arms, ref), reference=arms[0])
    return dataclasses.replace(data, name=name)


def _arms_of_the_named_studies() -> list[str]:
    names = shipped_names()
    arms = sorted({a for s in NAMED for a in names[s]} - {"rl_ready", "plain", "plain_q", *NAMED})
    return list(dict.fromkeys(["grpo", *arms, *ADVERSARIAL[:5]]))  # grpo: the reference


@pytest.fixture(scope="module")
def paper_pieces() -> tuple[object, str]:
    data = named_study(_arms_of_the_named_studies())
    # [:3]: headline, configuration and took_effect: a float and a further table named with `_`
    return data, paper.paper_tex(build_tables(data).tables + _further_tables()[:3])


def test_the_paper_of_a_study_with_shipped_names_is_safe_tex(paper_pieces):
    data, tables_tex = paper_pieces
    body = document(data, [Path("figures/forest_plot.png")])
    assert tex_problems(tables_tex) == [] and tex_problems(body) == []
    assert "vllm\\_tis" in tables_tex and "a\\&b" in tables_tex  # the names are there, escaped
    assert "\\section*{Results: off\\_policy \\& fair \\#1}" in body


def tex_available() -> bool:
    if shutil.which("pdflatex") and shutil.which("kpsewhich"):
        found = subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True)
        return bool(found.stdout.strip())
    return False


@pytest.mark.skipif(
    not tex_available() and os.environ.get("ABLATE_REQUIRE_TEX") != "1",
    reason="pdflatex with booktabs not installed (make test-latex installs it)",
)
def test_the_paper_of_a_study_with_underscored_names_compiles(paper_pieces, tmp_path):
    data, tables_tex = paper_pieces
    (tmp_path / "tables").mkdir()
    (tmp_path / "tables" / "paper.tex").write_text(tables_tex)
    (tmp_path / "paper.tex").write_text(document(data, []))
    done = compile_pdf(tmp_path / "paper.tex")
    assert done is not None and done.pdf is not None, done and done.error
    assert done.pdf.exists() and done.pages >= 1
