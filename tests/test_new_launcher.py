"""A new launcher is one registration (`ablate.launch.registry.register_launcher`): its options
record, what it accepts of `ablate run`'s own options, a check of what it needs to reach, and
`build`, which returns the runner's `launch` callable. Here a throwaway launcher, defined and
registered in this file only, trains a study's trials through `ablate run --launcher throwaway
--launcher-opt ...`: the trials reach it, its options arrive typed, a bad option is one line before
anything is created, and no library file names it. A launcher of a study's own, in a module
beside the study file, registers itself the same way when the study file imports it."""

from __future__ import annotations

import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

import ablate
from ablate import tracking
from ablate.base.errors import ConfigError
from ablate.commands.cli import main
from ablate.launch import registry
from ablate.launch.options import Launch
from ablate.launch.registry import (
    LauncherEntry,
    LaunchRequest,
    check_run,
    launcher_names,
    register_launcher,
)
from ablate.launch.slurm_options import SlurmOptions
from ablate.study import load_study
from ablate.study.identity import identified_trials
from ablate.study.runner import results_paths, run_trial
from ablate.testing import exactly_once_problems, study_ledger, zoo_model_built

pytestmark = [
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ablate.base.errors.StudyWarning"),
]
needs_zoo = pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo model 'hopeless'")

STEPS = 2
STUDY = """
from ablate.study import Budget, EvalSpec, Study, arm
{imports}
STUDY = Study(
    name={name!r},
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo"), arm("dr_grpo", "dr_grpo")],
    seeds=[0],
    budget=Budget(max_steps={steps}, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(at_start=False, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    {launch}
)
"""


def write_study(folder: Path, name: str, imports: str = "", launch: str = "") -> Path:
    path = folder / f"{name}.py"
    text = STUDY.format(name=name, steps=STEPS, imports=imports, launch=launch)
    path.write_text(textwrap.dedent(text))
    return path


@dataclass(frozen=True, kw_only=True)
class ThrowawayOptions:
    """What the throwaway launcher takes (recorded; the trials train one by one here)."""

    slots: int = 1
    """Trials at once."""
    pool: str = "default"
    """The pool the trials go to ("unreachable": the launcher's check refuses it)."""
    weight: float | None = None
    """A number or None."""
    spot: bool = False
    """A flag."""
    tier: Literal["low", "high"] = "low"
    """One of two values."""


@pytest.fixture
def registry_copy(monkeypatch):
    """The registry's table as a copy, restored after the test (the shipped launchers registered
    first: a module registers itself once, when first imported)."""
    registry.launcher_entries()
    monkeypatch.setattr(registry, "_ENTRIES", dict(registry._ENTRIES))


@pytest.fixture
def throwaway(registry_copy):
    """Registers launcher "throwaway"; returns what it saw: its requests and the trials given."""
    seen: dict = {"requests": [], "trials": []}

    def check(options: ThrowawayOptions) -> None:
        if options.pool == "unreachable":
            raise ConfigError("--launcher throwaway: pool 'unreachable' cannot be reached")

    @register_launcher(
        "throwaway", options=ThrowawayOptions, summary="a test's pool", check=check, detach=True
    )
    def build(request: LaunchRequest):
        seen["requests"].append(request)
        study = request.study

        def launch(todo, uri, root, hooks):
            seen["trials"].append([t.id for t in todo])
            if request.detach:
                return None
            folder = results_paths(root, study)["study"]
            return [
                run_trial(study, t, uri, folder, hooks, i, len(todo)) for i, t in enumerate(todo)
            ]

        return launch

    return seen


@needs_zoo
def test_a_study_runs_through_the_registered_launcher_with_its_options_typed(
    throwaway, tmp_path, capsys
):
    study_file = write_study(tmp_path, "thrown")
    results = tmp_path / "results"
    opts = ["slots=3", "pool=gpu pool", "weight=0.5", "spot=yes", "tier=high"]
    argv = ["run", str(study_file), "--launcher", "throwaway", "--results", str(results)]
    argv += [arg for opt in opts for arg in ("--launcher-opt", opt)]

    assert main([*argv, "--out", str(tmp_path / "reports")]) == 0

    [request] = throwaway["requests"]
    assert request.options == ThrowawayOptions(
        slots=3, pool="gpu pool", weight=0.5, spot=True, tier="high"
    )
    assert request.study_file == str(study_file) and not request.detach
    ids = [t.id for t in identified_trials(load_study(study_file))]
    assert throwaway["trials"] == [ids]  # every trial, handed to the launcher once
    uri = tracking.default_uri(results)
    ledger = study_ledger(uri, "thrown")
    assert exactly_once_problems(ledger, ids, range(1, STEPS + 1), "reward/mean") == []
    assert (tmp_path / "reports" / "thrown" / "report.md").exists()
    ended = re.findall(
        r"trial ended: (\w+) \| hopeless \| plain \| seed 0: finished", capsys.readouterr().out
    )
    assert sorted(ended) == ["dr_grpo", "grpo"]  # the run's progress hooks reached the launcher


@needs_zoo
def test_a_launcher_beside_the_study_registers_itself_and_detaches(
    registry_copy, tmp_path, capsys, request
):
    """The study file imports its launcher's module, which registers "pool" as it loads."""
    module = "pool_launcher_for_test"
    request.addfinalizer(lambda: sys.modules.pop(module, None))
    (tmp_path / f"{module}.py").write_text(POOL_LAUNCHER)
    imports = f"from ablate.study import Launch\nfrom {module} import PoolOptions"
    launch = 'launch=Launch(launcher="pool", options=PoolOptions(size=2, queue="q")),'
    study_file = write_study(tmp_path, "pooled", imports, launch)
    argv = ["run", str(study_file), "--launcher-opt", "size=4", "--detach"]

    assert main([*argv, "--results", str(tmp_path / "results")]) == 0

    out = capsys.readouterr().out
    handed = re.search(r"pool got (\d+) trial\(s\): size=4 queue=q", out)
    assert handed and int(handed.group(1)) == 2  # the study's options, the command line's over
    assert "detached: `ablate status" in out


POOL_LAUNCHER = '''
from dataclasses import dataclass

from ablate.launch.registry import register_launcher


@dataclass(frozen=True, kw_only=True)
class PoolOptions:
    """A pool's options."""

    size: int = 1
    """Workers in the pool."""
    queue: str = "default"
    """Its queue."""


@register_launcher("pool", options=PoolOptions, summary="a pool", detach=True)
def build(request):
    def launch(todo, uri, root, hooks):
        o = request.options
        request.echo(f"pool got {len(todo)} trial(s): size={o.size} queue={o.queue}")
        return None  # submitted; the pool trains them

    return launch
'''


ERRORS = {
    "unknown launcher": (
        ["--launcher", "throwawy"],
        "unknown launcher 'throwawy' (did you mean 'throwaway'?); valid: local, slurm, throwaway "
        "(a launcher of your own registers itself when its module is imported, e.g. by the study "
        "file)",
    ),
    "unknown option": (
        ["--launcher-opt", "slot=3"],
        "--launcher-opt slot: launcher 'throwaway' has no option 'slot' (did you mean slots?); "
        "its options: slots, pool, weight, spot, tier",
    ),
    "mistyped integer": (
        ["--launcher-opt", "slots=many"],
        "--launcher-opt slots=many: option slots of launcher 'throwaway' takes an integer",
    ),
    "mistyped optional number": (
        ["--launcher-opt", "weight=heavy"],
        "--launcher-opt weight=heavy: option weight of launcher 'throwaway' takes a number or None",
    ),
    "value outside a Literal": (
        ["--launcher-opt", "tier=mid"],
        "--launcher-opt tier=mid: option tier of launcher 'throwaway' takes one of 'low', 'high'",
    ),
    "no =": (["--launcher-opt", "slots"], "--launcher-opt expects key=value, got 'slots'"),
    "the launcher's own check": (
        ["--launcher-opt", "pool=unreachable"],
        "--launcher throwaway: pool 'unreachable' cannot be reached",
    ),
    "--workers": (
        ["--workers", "2"],
        "--workers is for --launcher local; with throwaway the launcher places the trials itself",
    ),
    "a slurm alias": (
        ["--slurm-partition", "gpu"],
        "--slurm-partition is an option of --launcher slurm; this run's launcher is throwaway",
    ),
}


@pytest.mark.parametrize("case", ERRORS, ids=list(ERRORS))
def test_a_bad_launcher_option_is_one_line_before_anything_is_created(
    case, throwaway, tmp_path, capsys
):
    args, message = ERRORS[case]
    study_file = write_study(tmp_path, "refused")
    argv = ["run", str(study_file), "--launcher", "throwaway", *args]

    assert main([*argv, "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")]) == 2

    err = capsys.readouterr().err
    assert err == f"error: {message}\n"
    assert throwaway["trials"] == [] and not (tmp_path / "r").exists()
    assert not (tmp_path / "o").exists()


def test_adding_a_launcher_touched_no_library_file(throwaway):
    """The registration above is all there is: the package never names the launcher, yet the
    registry, `Launch` and the option parser know it."""
    package = Path(ablate.__file__).parent
    naming = [p for p in package.rglob("*.py") if re.search("throwaway", p.read_text(), re.I)]
    assert naming == []
    assert "throwaway" in launcher_names()
    assert Launch(launcher="throwaway", options=ThrowawayOptions(slots=2)).options.slots == 2
    with pytest.raises(ConfigError, match="takes options=ThrowawayOptions"):
        Launch(launcher="throwaway", options=SlurmOptions())
    assert Launch(launcher="throwaway", detach=True).options == ThrowawayOptions()


def test_no_command_compares_a_launchers_name():
    """What differs between launchers is in their registrations, not in `ablate run`."""
    commands = Path(ablate.__file__).parent / "commands"
    name = r"""["'](?:local|slurm)["']"""
    branch = re.compile(rf"[!=]=\s*{name}|{name}\s*[!=]=|\bin\s*[(\[{{]\s*{name}")
    assert {p.name: branch.findall(p.read_text()) for p in commands.glob("*.py")} == {
        p.name: [] for p in commands.glob("*.py")
    }


def test_until_decided_cannot_detach_even_with_a_launcher_that_takes_both():
    both = LauncherEntry(
        name="both",
        options=ThrowawayOptions,
        build=lambda request: None,
        summary="takes both",
        until_decided=True,
        detach=True,
    )
    check_run(both, ThrowawayOptions(), workers=1, until_decided=True, detach=False)
    with pytest.raises(ConfigError, match="cannot --detach"):
        check_run(both, ThrowawayOptions(), workers=1, until_decided=True, detach=True)


@dataclass(kw_only=True)
class MutableOptions:
    """Not frozen."""

    size: int = 1
    """A size."""


@dataclass(frozen=True, kw_only=True)
class RequiredOptions:
    """A field without a default."""

    size: int
    """A size."""


def test_a_registration_is_checked_when_made(throwaway):
    for options, problem in (
        (MutableOptions, "must be a frozen keyword-only dataclass"),
        (RequiredOptions, r"options field\(s\) \['size'\] need a default"),
    ):
        with pytest.raises(ValueError, match=problem):
            register_launcher("bad", options=options, summary="bad")
    with pytest.raises(ValueError, match="'throwaway' is registered twice"):
        register_launcher("throwaway", options=ThrowawayOptions, summary="again")(print)
    assert "bad" not in launcher_names()
