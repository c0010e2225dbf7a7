"""What a test reads of a command's output: its one error line."""

from __future__ import annotations

from typing import Any


def one_error(capsys: Any) -> str:
    """The command's one error line (warnings aside), read from pytest's `capsys`; fails on a
    traceback or a second line."""
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if not line.startswith("warning: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]
