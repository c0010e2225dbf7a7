"""The README documents the presets and the setup commands (what the wheel holds:
tests/test_wheel_layout.py)."""

from __future__ import annotations

import re
from pathlib import Path

import ablate

ROOT = Path(__file__).resolve().parents[1]


def test_readme_preset_table_matches_the_presets():
    text = (ROOT / "README.md").read_text()
    grpo = ablate.baseline("grpo")
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", text, flags=re.M))
    assert set(rows) == set(ablate.baseline_names())
    for name, cell in rows.items():
        documented = set(re.findall(r"`(\w+)=", cell))
        assert documented == set(grpo.diff(ablate.baseline(name))), name


def test_readme_shows_both_setup_commands():
    text = (ROOT / "README.md").read_text()
    assert "make demo" in text and "make test" in text
