"""The wheel ships the presets (and the README documents them), and leaves the developer tools
(devtools/) in the repository."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
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
    assert "ablate/factors/objective.py" in names
    tops = {name.split("/")[0] for name in names if "/" in name}
    assert tops == {"ablate", "baselines", "ablate-0.1.0.dist-info"}, tops


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_the_package_list_leaves_the_developer_tools_out():
    """What setuptools packs, found as the build finds it (cheap: no wheel is built)."""
    from setuptools import find_packages

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = find_packages(str(ROOT), include=include)
    assert {"ablate", "ablate.commands", "ablate.report", "baselines"} <= set(packages)
    assert (ROOT / "devtools" / "__init__.py").exists()
    assert [p for p in packages if p.split(".")[0] not in ("ablate", "baselines")] == []
    assert not [p for p in packages if p.startswith(("ablate.bench", "devtools"))]
