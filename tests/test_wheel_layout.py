"""The wheel installs one top-level package, `ablate`: the repository's `baselines/` folder goes
in as `ablate.baselines` (pyproject's package-dir), so it cannot collide with OpenAI's
`baselines`; devtools/, studies/ and tests/ stay out. Installed or not, the presets import by
name and exist once."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import ablate

ROOT = Path(__file__).resolve().parents[1]
PRESETS = sorted(p.stem for p in (ROOT / "baselines").glob("*.py") if p.stem != "__init__")
needs_source = pytest.mark.skipif(
    not (ROOT / "pyproject.toml").exists(), reason="needs the source tree"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built offline from a copy of what it is built from (the checkout's own build/
    folder may hold files of an older layout, which a build there would pack)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for folder in ("ablate", "baselines"):
        shutil.copytree(ROOT / folder, source / folder, ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    cmd += ["-q", "-w", str(tmp / "dist"), str(source)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return next((tmp / "dist").glob("ablate-*.whl"))


@needs_source
def test_the_wheel_has_one_top_level_package_holding_the_presets(wheel):
    archive = zipfile.ZipFile(wheel)
    names = archive.namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"ablate", "ablate-0.1.0.dist-info"}, tops
    assert archive.read("ablate-0.1.0.dist-info/top_level.txt").decode().split() == ["ablate"]
    assert PRESETS and "grpo" in PRESETS and "dapo" in PRESETS
    for preset in ("__init__", *PRESETS):
        assert f"ablate/baselines/{preset}.py" in names
    assert "ablate/factors/objective.py" in names
    assert "ablate/tasks/data/arithmetic_subsets.json" in names  # package data still ships
    assert any(n.startswith("ablate/models/zoo/rl_ready/") for n in names)


@needs_source
def test_the_installed_wheel_imports_the_presets_by_name(wheel, tmp_path):
    """Installed into a bare folder put first on the path (outside the checkout): the package
    and its presets come from there, `ablate.baselines` and a preset module as plain modules."""
    target = tmp_path / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q"]
    subprocess.run([*cmd, "--target", str(target), str(wheel)], check=True, timeout=300)
    packages = [p.name for p in target.iterdir() if p.name != "bin"]  # bin/: the `ablate` script
    assert sorted(packages) == ["ablate", "ablate-0.1.0.dist-info"]
    code = (
        f"import sys; sys.path.insert(0, {str(target)!r}); "
        "import ablate, ablate.baselines.dapo as dapo; "
        "assert ablate.baseline('dapo') is dapo.ALGORITHM; "
        "assert 'baselines' not in sys.modules; "
        "print(ablate.baselines.__file__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(target / "ablate" / "baselines" / "__init__.py")


def test_an_uninstalled_checkout_finds_the_presets_beside_the_package():
    """A checkout on the path but not installed (`PYTHONPATH=.`: the GPU targets) maps
    `baselines/` to `ablate.baselines` as the install does (`ablate.base.checkout`)."""
    # -S: no .pth file runs, so no editable finder; site-packages only for the dependencies
    code = (
        "import site, sys; sys.path += site.getsitepackages(); "
        "import ablate; from ablate.baselines.grpo import ALGORITHM; "
        "assert ablate.baseline('grpo') is ALGORITHM; "
        "assert 'baselines' not in sys.modules; print(ablate.baselines.__path__[0])"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == ROOT / "baselines"


def test_each_preset_module_is_loaded_once_under_the_package_name():
    for name in ablate.baseline_names():
        assert ablate.baseline(name) is sys.modules[f"ablate.baselines.{name}"].ALGORITHM
    assert not [m for m in sys.modules if m == "baselines" or m.startswith("baselines.")]


def test_the_folder_refuses_to_load_under_its_own_name():
    """`import baselines` from the repository root would load a second copy of every preset."""
    out = subprocess.run(
        [sys.executable, "-c", "import baselines"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode != 0 and "ablate.baselines" in out.stderr


@needs_source
def test_the_package_list_is_every_package_under_ablate_plus_the_presets():
    """pyproject lists the packages (the mapped folder is not under ablate/, so a find would
    miss it): a new package under ablate/ must be listed, and nothing outside ablate ships."""
    from setuptools import find_packages

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert tool["package-dir"] == {"ablate.baselines": "baselines"}
    found = find_packages(str(ROOT), include=["ablate", "ablate.*"])
    assert sorted(tool["packages"]) == sorted([*found, "ablate.baselines"])
    assert all(p == "ablate" or p.startswith("ablate.") for p in tool["packages"])
