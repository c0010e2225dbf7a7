"""Fault suite, fast set for options: one record pass (`ablate.factors.fields.record_problems`)
over every user-facing option record, from the rules each declares; the sbatch options the
Slurm launcher writes itself; study names sized for file names; every sampling phase against
memory; an absurd budget's time. Through `ablate run` each is one line, exit code 2, before any
folder is created or anything is computed."""

from __future__ import annotations

import math
import re
import textwrap
import warnings

import pytest

from ablate.base.errors import AblateError, ConfigError, StudyError, StudyWarning
from ablate.commands.cli import main
from ablate.factors.fields import Rule, record_problems, rule_problem
from ablate.launch.slurm_options import OWNED, sbatch_key_problem
from ablate.study import (
    Budget,
    ElicitSpec,
    EvalSpec,
    Launch,
    Optim,
    PassKSpec,
    SlurmOptions,
    Study,
    arm,
)
from ablate.study.checks import MAX_NAME_BYTES
from ablate.study.resources import training_estimate
from ablate.testing import one_error, zoo_model_built

INF, NAN = math.inf, math.nan

#: A bad option -> the words its refusal names (the record, the field, what it must be).
BAD = {
    "Budget(max_steps=0)": (lambda: Budget(max_steps=0), "Budget: max_steps=0 must be >= 1"),
    "Budget(top_p=2)": (lambda: Budget(top_p=2.0), "top_p=2.0 must be in (0, 1]"),
    "Budget(temperature=nan)": (
        lambda: Budget(temperature=NAN),
        "temperature=nan must be a finite number",
    ),
    "Budget(max_steps=True)": (lambda: Budget(max_steps=True), "max_steps=True must be an int"),
    "EvalSpec(ks=())": (lambda: EvalSpec(ks=()), "EvalSpec: ks=() must not be empty"),
    "EvalSpec(temperature=inf)": (lambda: EvalSpec(temperature=INF), "temperature=inf must be"),
    "Optim(betas=(1, .5))": (lambda: Optim(betas=(1.0, 0.5)), "must be finite numbers in [0, 1)"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_every_setting_record_is_checked_by_its_declared_rules(case):
    make, words = BAD[case]
    problems = make().problems()
    assert len(problems) == 1 and words in problems[0], problems


def _study(**changes) -> Study:
    base = dict(name="s", base_models=["hopeless"], arms=[arm("g", "grpo")], passk=None)
    return Study(**{**base, **changes})


#: A study option -> the words its StudyError holds.
STUDY_BAD = {
    "elicit temperatures inf": (
        dict(passk=PassKSpec(elicit=ElicitSpec(temperatures=(INF,)))),
        "passk.elicit: ElicitSpec: temperatures=(inf,) must be a tuple of finite numbers",
    ),
    "elicit templates []": (
        dict(passk=PassKSpec(elicit=ElicitSpec(templates=[]))),
        "templates=() must not be empty (None searches the study's templates)",
    ),
    "elicit n 0": (dict(passk=PassKSpec(elicit=ElicitSpec(n=0))), "ElicitSpec: n=0 must be >= 1"),
    "elicit shots 1": (dict(passk=PassKSpec(elicit=ElicitSpec(shots=1))), "shots=1 must be a tup"),
    "passk temperature inf": (
        dict(passk=PassKSpec(temperature=INF)),
        "passk: PassKSpec: temperature=inf must be a finite number",
    ),
    "passk templates []": (dict(passk=PassKSpec(templates=[])), "templates=[] must not be empty"),
    "name 300 chars": (dict(name="x" * 300), "is 300 bytes long: at most 128"),
    "name ..": (dict(name=".."), "name='..' must be letters, digits"),
    "name -x": (dict(name="-x"), "not starting with '.' or '-'"),
    "name with a slash": (dict(name="a/b"), "name='a/b' must be letters"),
}


@pytest.mark.parametrize("case", list(STUDY_BAD))
def test_every_study_option_is_one_problem_naming_its_field(case):
    changes, words = STUDY_BAD[case]
    with pytest.raises(StudyError) as raised:
        _study(**changes)
    assert words in str(raised.value) and "\n" not in str(raised.value), str(raised.value)
    assert "x" * 61 not in str(raised.value)  # a long name is not repeated whole


def test_a_study_name_is_sized_for_file_names():
    assert MAX_NAME_BYTES + len("-tune") + len(".tmp-4194304") < 255  # room for what is added
    assert _study(name="n" * MAX_NAME_BYTES).name == "n" * MAX_NAME_BYTES
    with pytest.raises(StudyError, match=f"is {MAX_NAME_BYTES + 1} bytes long"):
        _study(name="n" * (MAX_NAME_BYTES + 1))
    with pytest.raises(StudyError, match="must be a non-empty string"):
        _study(name="")


#: SlurmOptions that must be refused -> the words of the refusal.
SLURM_BAD = {
    "mem_gb nan": (dict(mem_gb=NAN), "SlurmOptions: mem_gb=nan must be a finite number or None"),
    "mem_gb inf": (dict(mem_gb=INF), "mem_gb=inf must be a finite number"),
    "mem_gb 0": (dict(mem_gb=0.0), "mem_gb=0.0 must be > 0"),
    "time_min 0": (dict(time_min=0), "time_min=0 must be >= 1"),
    "time_min text": (dict(time_min="2h"), "time_min='2h' must be an integer"),
    "partition empty": (dict(partition=""), "partition='' must not be empty"),
    "sbatch array": (dict(sbatch={"array": "0-99999"}), "sbatch key 'array': --array is the"),
    "sbatch --output": (dict(sbatch={"--output": "x"}), "--output is the launcher's own"),
    "sbatch J": (dict(sbatch={"J": "x"}), "--job-name is the launcher's own"),
    "sbatch job_name": (dict(sbatch={"job_name": "x"}), "--job-name is the launcher's own"),
    "sbatch arr": (dict(sbatch={"arr": "0-9"}), "--array is the launcher's own"),
    "sbatch time": (dict(sbatch={"time": "10"}), "use SlurmOptions(time_min=...)"),
    "sbatch bad key": (dict(sbatch={"account=rl": "x"}), "not an sbatch option's name"),
    "sbatch not a mapping": (dict(sbatch=["account"]), "sbatch=['account'] must be a mapping"),
}


@pytest.mark.parametrize("case", list(SLURM_BAD))
def test_bad_slurm_options_are_refused_when_built(case):
    changes, words = SLURM_BAD[case]
    with pytest.raises(ConfigError) as raised:
        SlurmOptions(**changes)
    assert words in str(raised.value), str(raised.value)


def test_every_sbatch_line_the_launcher_writes_is_refused_as_an_extra_key(tmp_path, monkeypatch):
    """The owned keys are read off the script submitit really writes for the launcher's
    parameters: an option the launcher starts writing later fails this test."""
    from submitit.slurm.slurm import SlurmExecutor, _make_sbatch_string

    from ablate.study.slurm import _executor

    # submitit refuses to build a Slurm executor where `srun` is not on PATH; this test only
    # writes the script (nothing is submitted), so it must not depend on Slurm being installed.
    monkeypatch.setattr(SlurmExecutor, "affinity", classmethod(lambda cls: 2))

    study = _study(name="owned")
    full = SlurmOptions(partition="p", gpus_per_task=1, mem_gb=2.0, array_parallelism=2)
    executor = _executor(tmp_path, study, full, "slurm", 4)
    script = _make_sbatch_string(
        command="x", folder=tmp_path, map_count=4, **executor._executor.parameters
    )
    written = re.findall(r"^#SBATCH --([\w-]+)", script, flags=re.MULTILINE)
    assert {"array", "output", "error", "job-name", "partition", "mem"} <= set(written)
    assert [k for k in written if sbatch_key_problem(k) is None] == []
    assert set(written) <= set(OWNED)
    for fine in ("account", "qos", "constraint", "gres", "mail-user", "exclude", "gpus"):
        assert sbatch_key_problem(fine) is None, fine
    assert SlurmOptions(sbatch={"account": "rl", "qos": "high"}).sbatch["qos"] == "high"


def test_a_launch_checks_any_launchers_options_by_their_types():
    from dataclasses import dataclass

    from ablate.launch.registry import _ENTRIES, register_launcher

    @dataclass(frozen=True, kw_only=True)
    class ThrowawayOptions:
        nodes: int = 1
        fraction: float = 0.5

    register_launcher("options-typed", options=ThrowawayOptions, summary="a test's")(
        lambda request: None
    )
    try:
        with pytest.raises(ConfigError, match=r"ThrowawayOptions: fraction=nan must be a finite"):
            Launch(launcher="options-typed", options=ThrowawayOptions(fraction=NAN))
        assert Launch(launcher="options-typed").options == ThrowawayOptions()
    finally:
        _ENTRIES.pop("options-typed")


def test_the_rules_read_as_words():
    assert Rule(low=1).bound() == ">= 1" and Rule(above=0).bound() == "> 0"
    assert Rule(above=0, high=1).bound() == "in (0, 1]" and Rule(low=0, below=1).bound() == (
        "in [0, 1)"
    )
    assert rule_problem(None, "x", Rule(low=1)) is None  # None: an optional field left off
    assert rule_problem((1, 0), "ks", Rule(low=1), "tuple[int, ...]") == (
        "ks=(1, 0) must be integers >= 1"
    )
    assert rule_problem("b", "axis", Rule(choices=("a",))) == "axis='b' must be one of 'a'"
    assert record_problems(Budget()) == [] and record_problems(SlurmOptions()) == []
    assert issubclass(ConfigError, AblateError)


def test_an_absurd_budget_says_the_time_it_implies():
    line = training_estimate(Budget(max_steps=10**12), trials=4)
    assert line is not None and line.startswith("Budget: max_steps=1,000,000,000,000 at 5,120")
    assert "18,379 years of training per trial (4 trial(s))" in line
    assert training_estimate(Budget(), trials=1) is None  # 100 steps: a minute
    capped = Budget(max_steps=10**12, max_generated_tokens=10**7)  # stops at its token budget
    assert training_estimate(capped, trials=1) is None
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        _study(budget=Budget(max_steps=10**12))
    assert [str(w.message)[:33] for w in said if w.category is StudyWarning] == [
        "Budget: max_steps=1,000,000,000,0"
    ]


# --- through `ablate run`: one line, exit 2, nothing created -----------------------------------
STUDY = """
from ablate.study import Budget, ElicitSpec, EvalSpec, Launch, PassKSpec, SlurmOptions, Study, arm

STUDY = Study(
    name="options",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo", kl_coef=0.0)],
    seeds=[0],
    budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
)
"""

#: A change to the study file -> the words of its one line.
THROUGH_RUN = {
    'launch=Launch(launcher="slurm", options=SlurmOptions(mem_gb=float("nan")))': (
        "SlurmOptions: mem_gb=nan must be a finite number or None"
    ),
    'launch=Launch(launcher="slurm", options=SlurmOptions(sbatch={"array": "0-99999"}))': (
        "sbatch key 'array': --array is the launcher's own"
    ),
    'name="' + "y" * 300 + '"': "is 300 bytes long: at most 128",
    "passk=PassKSpec(n=2, ks=(1,), max_problems=2, elicit=ElicitSpec(n=10**9))": (
        "ElicitSpec: n=1000000000 is more than this machine's RAM can hold"
    ),
    'passk=PassKSpec(n=2, ks=(1,), elicit=ElicitSpec(temperatures=(float("inf"),)))': (
        "temperatures=(inf,) must be a tuple of finite numbers"
    ),
    "passk=PassKSpec(n=2, ks=(1,), elicit=ElicitSpec(templates=[]))": (
        "templates=() must not be empty"
    ),
}


@pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo not available")
@pytest.mark.parametrize("change", list(THROUGH_RUN))
def test_a_bad_option_is_one_line_exit_2_and_nothing_created(change, tmp_path, capsys):
    text = textwrap.dedent(STUDY)
    if change.startswith("name="):
        text = text.replace('name="options"', change)
    else:
        text = text.replace("    passk=None,\n", "") + ""
        text = text.replace("    seeds=[0],\n", f"    seeds=[0],\n    {change},\n")
    study = tmp_path / "options.py"
    study.write_text(text)
    results, out = tmp_path / "results", tmp_path / "out"
    assert main(["run", str(study), "--results", str(results), "--out", str(out)]) == 2
    assert THROUGH_RUN[change] in one_error(capsys)
    assert not results.exists() and not out.exists()


@pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo not available")
@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("sbatch.array=0-9", "--array is the launcher's own"),
        ("sbatch.output=/tmp/x", "--output is the launcher's own"),
        ("mem_gb=nan", "takes a finite number or None"),
    ],
)
def test_a_bad_launcher_opt_is_one_line_before_anything(item, words, tmp_path, capsys):
    study = tmp_path / "options.py"
    study.write_text(textwrap.dedent(STUDY))
    results = tmp_path / "results"
    argv = ["run", str(study), "--results", str(results), "--launcher", "slurm"]
    assert main([*argv, "--launcher-opt", item]) == 2
    assert words in one_error(capsys)
    assert not results.exists()
