"""Every command's help reads as whole sentences: the command list gives one sentence per
command, and a command's own help breaks lines only where the terminal is full."""

from __future__ import annotations

import re

import pytest
import typer.main

from ablate.commands.cli import app, main
from ablate.commands.help_text import first_sentence, paragraphs, reflow

#: A sentence boundary inside a line: end mark, space, capital (an abbreviation aside).
INNER_END = re.compile(r"(?<!e\.g)(?<!i\.e)[.!?] [A-Z]")


def command_paths(command=None, prefix=()) -> list[tuple[str, ...]]:
    """Every command and group under the `ablate` command, as argv prefixes."""
    command = command or typer.main.get_command(app)
    found = []
    for name, sub in getattr(command, "commands", {}).items():
        found.append((*prefix, name))
        found.extend(command_paths(sub, (*prefix, name)))
    return found


def docstring_of(path: tuple[str, ...]):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


def rendered(capsys, argv) -> list[str]:
    """The help's lines without the panels' borders and padding."""
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    return [line.strip("│ ").rstrip() for line in out.splitlines()]


def listed(lines: list[str], names) -> dict[str, str]:
    """The command list's text for each name, its wrapped lines joined."""
    rows: dict[str, list[str]] = {}
    current = None
    for line in lines:
        head = line.split(" ", 1)
        if head[0] in names and len(head) == 2:
            current = head[0]
            rows[current] = [head[1].strip()]
        elif current and line and not line.startswith(("╰", "╭")):
            rows[current].append(line.strip())
        else:
            current = None
    return {name: " ".join(parts) for name, parts in rows.items()}


PATHS = command_paths()


def test_the_registry_is_walked():
    assert {("run",), ("worker",), ("zoo",), ("zoo", "list"), ("report",)} <= set(PATHS)


@pytest.mark.parametrize("width", [80, 1000])
@pytest.mark.parametrize("group", [(), ("zoo",)])
def test_the_command_list_gives_each_command_one_whole_sentence(capsys, monkeypatch, group, width):
    monkeypatch.setenv("COLUMNS", str(width))
    names = [p[-1] for p in PATHS if p[:-1] == group]
    rows = listed(rendered(capsys, group), names)
    assert set(rows) == set(names)
    for name, text in rows.items():
        command = docstring_of((*group, name))
        assert text == first_sentence(command.help), name  # wrapped, never cut
        assert text.endswith(".") and not INNER_END.search(text), name  # one sentence
        assert paragraphs(command.help)[0].startswith(text[:-1]), name


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_a_commands_help_breaks_lines_only_where_the_terminal_is_full(capsys, monkeypatch, path):
    monkeypatch.setenv("COLUMNS", "1000")  # wide enough: any line break is the docstring's
    lines = rendered(capsys, path)
    usage = next(i for i, line in enumerate(lines) if line.startswith("Usage:"))
    panel = next(i for i, line in enumerate(lines) if line.startswith("╭"))
    description = [line for line in lines[usage + 1 : panel] if line]
    assert description == paragraphs(docstring_of(path).help)
    for line in description:
        assert line.endswith((".", ")")), line  # a paragraph, not a fragment of one


def test_paragraphs_join_a_docstrings_lines_and_keep_marked_blocks():
    doc = """Run WAITING trials until none is
    left. Start one per machine.

        Second paragraph,
        in two lines.

    \b
    a | b
    c | d
    """
    assert paragraphs(doc) == [
        "Run WAITING trials until none is left. Start one per machine.",
        "Second paragraph, in two lines.",
        "\b\na | b\nc | d",
    ]
    assert reflow(doc) == "\n\n".join(paragraphs(doc))


@pytest.mark.parametrize(
    ("doc", "sentence"),
    [
        ("Run WAITING trials until none is\nleft. Start one per machine.", None),
        (
            "Sample n completions; print pass@k.\nProgress: a bar.",
            "Sample n completions; print pass@k.",
        ),
        ("Load a model, e.g. Rl_ready. Then train.", "Load a model, e.g. Rl_ready."),
        ("The tiny zoo", "The tiny zoo."),
        ("Alias of `ablate ui` (the same server).", "Alias of `ablate ui` (the same server)."),
        ("", ""),
    ],
)
def test_first_sentence(doc, sentence):
    expected = "Run WAITING trials until none is left." if sentence is None else sentence
    assert first_sentence(doc) == expected
