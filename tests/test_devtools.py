"""The developer tools: one way to start them (`python -m devtools TOOL`), each listed with one
line, each importable without running it; and the package itself neither ships nor imports them."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ablate.commands.cli import main as ablate_main
from devtools.__main__ import TOOLS, main

ROOT = Path(__file__).resolve().parents[1]


def _listed(help_text: str) -> dict[str, str]:
    """tool name -> its line, from the `tools:` block of the help."""
    block = help_text.split("tools:\n", 1)[1]
    return dict(line.strip().split(None, 1) for line in block.splitlines() if line.strip())


def test_help_lists_every_tool_with_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "devtools", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    listed = _listed(done.stdout)
    assert list(listed) == list(TOOLS)
    wanted = {"bench", "gpu-check", "calibrate", "curve-calibration", "preset-reach"}
    wanted |= {"profile-step", "verl-parity", "architecture", "arithmetic-subsets", "kernel-matrix"}
    wanted |= {"plan-calibration", "control-detection"}
    assert set(listed) == wanted
    assert all(len(summary) > 20 for summary in listed.values())


def test_help_imports_no_tool():
    """`--help` reads the table only: no tool module (nor torch) is imported for it."""
    code = (
        "import sys; from devtools.__main__ import main; main(['--help']); "
        "print(sorted(m for m in sys.modules if m.startswith('devtools.') or m == 'torch'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "['devtools.__main__']"


@pytest.mark.parametrize("name", list(TOOLS))
def test_each_tool_module_imports_and_has_a_main(name):
    module = importlib.import_module(TOOLS[name].module)
    assert callable(module.main)


@pytest.mark.parametrize("name", list(TOOLS))
def test_each_tool_answers_its_own_help(name, capsys):
    with pytest.raises(SystemExit) as stop:
        main([name, "--help"])
    assert stop.value.code == 0
    assert f"python -m devtools {name}" in capsys.readouterr().out


def test_no_tool_prints_the_usage_and_an_unknown_one_is_one_line(capsys):
    assert main([]) == 2
    assert "usage: python -m devtools TOOL" in capsys.readouterr().out
    assert main(["benhc"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: no tool 'benhc'") and "bench" in err and "\n" not in err


def test_verl_parity_without_verl_is_one_line_and_stubs_nothing(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "verl", None)  # as if verl were not on the path
    finders = list(sys.meta_path)
    assert main(["verl-parity"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: verl-parity needs verl") and "\n" not in err
    assert sys.meta_path == finders  # its stubs (datasets, pyarrow, ...) would break later tests


@pytest.mark.parametrize("command", ["bench", "calibrate"])
def test_the_tools_are_no_longer_ablate_commands(command, capsys):
    assert ablate_main([command, "--help"]) == 2
    assert f"No such command '{command}'" in capsys.readouterr().err


def test_the_package_never_imports_devtools():
    """devtools is not installed with ablate: an import of it from the package would fail for
    every user of the wheel."""
    pattern = re.compile(r"^\s*(from|import)\s+devtools\b", re.M)
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "ablate").rglob("*.py"))
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
