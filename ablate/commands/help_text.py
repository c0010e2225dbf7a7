"""Command help as whole sentences (a helper, not a command).

Docstrings are wrapped at the source's line length. Typer's rich help keeps those single line
breaks inside a paragraph and then wraps the text again at the terminal's width, so a sentence
showed broken in the middle ("… until none is" / "left. Start one …"). `tidy_help` joins each
paragraph onto one line (the terminal alone wraps it) and gives every command a short help of
its first sentence, which is what the command list shows."""

from __future__ import annotations

import inspect
import re

#: A sentence ends at . ! or ? followed by a space and a capital, a backtick or a quote; a
#: lowercase word after "e.g." continues it.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(])")
#: Abbreviations a capital may follow without ending the sentence.
_ABBREVIATIONS = ("e.g.", "i.e.", "vs.", "cf.", "etc.")


def paragraphs(text: str) -> list[str]:
    """The paragraphs of a docstring (blank-line separated), each on one line. A paragraph that
    starts with click's `\\b` marker keeps its line breaks (a list or a table)."""
    result = []
    for block in re.split(r"\n\s*\n", inspect.cleandoc(text or "")):
        block = block.strip("\n")
        if not block.strip():
            continue
        if block.startswith("\b"):
            result.append(block)
        else:
            result.append(" ".join(line.strip() for line in block.splitlines()))
    return result


def reflow(text: str) -> str:
    """`text` with each paragraph on one line, paragraphs separated by a blank line."""
    return "\n\n".join(paragraphs(text))


def first_sentence(text: str) -> str:
    """The first sentence of the first paragraph, ending with its full stop (one is added to a
    paragraph that has none)."""
    found = paragraphs(text)
    if not found:
        return ""
    first = found[0].lstrip("\b").strip()
    for match in _SENTENCE_END.finditer(first):
        if not first[: match.start()].endswith(_ABBREVIATIONS):
            first = first[: match.start()]
            break
    return first if first.endswith((".", "!", "?")) else first + "."


def tidy_help(app) -> None:
    """Reflow the help of every command and command group of the Typer `app` (recursively) and
    set each one's short help to its first sentence."""
    from typer.main import solve_typer_info_help

    for info in app.registered_commands:
        text = info.help if info.help is not None else inspect.getdoc(info.callback) or ""
        info.help = reflow(text)
        info.short_help = info.short_help or first_sentence(text)
    for group in app.registered_groups:
        text = solve_typer_info_help(group)
        group.help = reflow(text)
        group.short_help = first_sentence(text)
        if group.typer_instance is not None:
            tidy_help(group.typer_instance)
