"""The wheel ships the presets (and the README documents them)."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

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


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_wheel_includes_the_presets(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(tmp_path),
        str(ROOT),
    ]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    wheel = next(tmp_path.glob("ablate-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for preset in ("grpo", "dr_grpo", "dapo", "gspo", "ppo"):
        assert f"baselines/{preset}.py" in names
    assert "ablate/objective.py" in names
