"""The Slurm launcher through submitit's own local executors (no Slurm here): one array task per
unfinished trial, each trained by the local code path under its lease; what submitit pickles is
a module-level function and two strings; bad launcher options are one line before anything is
submitted. The same launcher on a real single-node Slurm: tests/test_slurm.py."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ablate import tracking
from ablate.base.errors import ConfigError
from ablate.commands.cli import main
from ablate.launch.options import Launch, resolve
from ablate.launch.slurm_options import SlurmOptions
from ablate.study import load_study
from ablate.study.identity import identified_trials
from ablate.study.runner import run_study
from ablate.study.slurm import array_launcher, run_array_task, submit, wait
from ablate.testing import exactly_once_problems, study_ledger, zoo_model_built

pytestmark = [
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ablate.base.errors.StudyWarning"),
]
needs_zoo = pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo model 'hopeless'")

STEPS = 2
STUDY = """
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name={name!r},
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo"), arm("dr_grpo", "dr_grpo")],
    seeds={seeds!r},
    budget=Budget(max_steps={steps}, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(at_start=False, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    checkpoint_every=1,
)
"""


def write_study(folder: Path, name: str, seeds=(0,)) -> Path:
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(STUDY.format(name=name, seeds=list(seeds), steps=STEPS)))
    return path


def ledger_problems(uri: str, study_file: Path) -> list[str]:
    study = load_study(study_file)
    ids = [t.id for t in identified_trials(study)]
    return exactly_once_problems(
        study_ledger(uri, study.name), ids, range(1, STEPS + 1), "reward/mean"
    )


@needs_zoo
def test_debug_array_trains_each_unfinished_trial_once_then_submits_nothing(tmp_path, capsys):
    study_file = write_study(tmp_path, "arr")
    study = load_study(study_file)
    results = tmp_path / "results"
    uri = tracking.default_uri(results)
    launch = array_launcher(study_file, study, SlurmOptions(), cluster="debug", poll_s=0)

    outcomes = run_study(study, results_dir=results, launch=launch)

    assert sorted(o.outcome for o in outcomes) == ["finished"] * 2
    assert ledger_problems(uri, study_file) == []
    [path] = (results / "arr" / "slurm").glob("submission-*.json")
    record = json.loads(path.read_text())  # readable: the study file and every trial's spec
    ids = [t.id for t in identified_trials(study)]
    assert sorted(t["trial_id"] for t in record["trials"]) == sorted(ids)
    assert {t["spec"]["budget"]["max_steps"] for t in record["trials"]} == {STEPS}
    assert record["study_file"] == str(study_file.resolve()) and set(record["tasks"]) == set(ids)
    parent = tracking.open_store(uri).find_study("arr")
    assert parent is not None

    again = run_study(study, results_dir=results, launch=launch)

    assert [o.outcome for o in again] == ["skipped"] * 2  # nothing left: nothing submitted
    assert len(list((results / "arr" / "slurm").glob("submission-*.json"))) == 1
    assert main(["status", str(study_file), "--results", str(results)]) == 0
    assert capsys.readouterr().out.strip().endswith("2 FINISHED")


@pytest.mark.slow  # four processes importing torch and MLflow: ~2 min on 2 shared cores
@needs_zoo
def test_two_local_arrays_of_one_study_train_each_trial_once(tmp_path):
    """Two submissions of the same trials, their tasks running at the same time as processes:
    the leases let one task train each trial; the other skips it (or finds it FINISHED)."""
    study_file = write_study(tmp_path, "twice")
    study = load_study(study_file)
    results = tmp_path / "results"
    uri = tracking.default_uri(results)
    store = tracking.open_store(uri)
    store.init()
    store.open_study(study.name)
    trials = identified_trials(study)
    options = SlurmOptions()

    first = submit(study_file, study, trials, uri, results, options, cluster="local")
    second = submit(study_file, study, trials, uri, results, options, cluster="local")
    wait(first, study, uri, results, echo=lambda _: None, poll_s=0.5)
    wait(second, study, uri, results, echo=lambda _: None, poll_s=0.5)

    assert ledger_problems(uri, study_file) == []
    results_of = [job.result() for job in first.jobs + second.jobs]
    per_trial = {
        t.id: sorted(r["outcome"] for r in results_of if r["trial_id"] == t.id) for t in trials
    }
    assert per_trial == {t.id: ["finished", "skipped"] for t in trials}


@needs_zoo
def test_what_submitit_pickles_is_a_function_reference_and_two_strings(tmp_path):
    study_file = write_study(tmp_path, "pickled")
    study = load_study(study_file)
    results = tmp_path / "results"
    uri = tracking.default_uri(results)
    trials = identified_trials(study)[:1]
    import submitit

    executor = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="debug")
    [job] = executor.map_array(run_array_task, ["submission.json"], [trials[0].id])
    blob = pickle.dumps(job.submission())
    delayed = pickle.loads(blob)

    assert delayed.function is run_array_task
    assert delayed.args == ("submission.json", trials[0].id) and delayed.kwargs == {}
    # a timeout or preemption requeues the same two strings (the trial resumes)
    again = run_array_task.checkpoint(*delayed.args)  # type: ignore[attr-defined]
    assert again.function is run_array_task and again.args == delayed.args
    del uri


def test_status_of_a_study_never_run_creates_nothing(tmp_path, capsys):
    study_file = write_study(tmp_path, "fresh")
    results = tmp_path / "results"

    assert main(["status", str(study_file), "--results", str(results)]) == 0

    assert capsys.readouterr().out.strip().endswith("2 not started")
    assert not results.exists()


def test_options_command_line_over_study_and_gpus_for_vllm():
    study_launch = Launch(launcher="slurm", options=SlurmOptions(partition="a", time_min=30))
    got = resolve(study_launch, "", False, ["partition=b", "gpus_per_task=None"])
    assert (got.launcher, got.options.partition, got.options.time_min) == ("slurm", "b", 30)
    assert got.options.gpus_per_task is None and study_launch.options.partition == "a"
    assert resolve(study_launch, "local").launcher == "local"
    assert resolve(None).launcher == "local"
    assert SlurmOptions().gpus_for({"vllm"}, "auto") == 1
    assert SlurmOptions().gpus_for({"hf", "vllm"}, "cuda") == 1
    assert SlurmOptions().gpus_for({"vllm"}, "cpu") == 0  # vLLM's CPU build
    assert SlurmOptions().gpus_for({"hf"}, "cuda:0") == 1
    assert SlurmOptions().gpus_for({"hf"}, "cpu") == 0
    assert SlurmOptions(gpus_per_task=4).gpus_for({"hf"}, "cpu") == 4
    with pytest.raises(ConfigError, match="local, slurm"):
        Launch(launcher="ssh")
    with pytest.raises(ConfigError, match="must be >= 1"):
        SlurmOptions(time_min=0)
    with pytest.raises(ConfigError, match="--launcher slurm"):
        Launch(detach=True)


def test_the_earlier_slurm_spelling_still_reads_and_options_are_type_checked():
    earlier = Launch(launcher="slurm", slurm=SlurmOptions(partition="gpu"), detach=True)
    assert earlier == Launch(launcher="slurm", options=SlurmOptions(partition="gpu"), detach=True)
    assert Launch(launcher="slurm").options == SlurmOptions()  # None: the launcher's defaults
    with pytest.raises(ConfigError) as err:
        Launch(launcher="local", options=SlurmOptions())
    assert (
        str(err.value)
        == "Launch(launcher='local') takes options=LocalOptions(...), not SlurmOptions"
    )
    with pytest.raises(ConfigError, match="once, as options="):
        Launch(launcher="slurm", options=SlurmOptions(), slurm=SlurmOptions())


def test_slurm_options_from_the_command_line_are_typed_and_checked():
    got = resolve(None, "slurm", False, ["time_min=30", "mem_gb=8", "sbatch.account=rl"])
    assert (got.options.time_min, got.options.mem_gb) == (30, 8.0)
    assert isinstance(got.options.mem_gb, float) and got.options.sbatch == {"account": "rl"}
    both = resolve(got, "", False, ["sbatch.qos=high", "partition=gpu"])
    assert both.options.sbatch == {"account": "rl", "qos": "high"}
    assert both.options.partition == "gpu" and both.options.time_min == 30
    with pytest.raises(ConfigError, match=r"^SlurmOptions: time_min=0 must be >= 1$"):
        resolve(None, "slurm", False, ["time_min=0"])  # the record's own range check
    with pytest.raises(ConfigError, match=r"option time_min of launcher 'slurm' takes an integer$"):
        resolve(None, "slurm", False, ["time_min=2h"])
    with pytest.raises(
        ConfigError, match=r"no option 'account' \(did you mean sbatch\.account\?\)"
    ):
        resolve(None, "slurm", False, ["account=rl"])  # an sbatch entry needs its prefix


def test_slurm_without_sbatch_is_one_line(tmp_path, capsys, monkeypatch):
    study_file = write_study(tmp_path, "nosbatch")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    args = ["run", str(study_file), "--launcher", "slurm", "--results", str(tmp_path / "r")]

    assert main(args) == 2

    err = capsys.readouterr().err
    assert err.startswith("error: --launcher slurm: sbatch, squeue, scancel not found on PATH")
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_slurm_with_workers_is_one_line(tmp_path, capsys, monkeypatch):
    study_file = write_study(tmp_path, "withworkers")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "squeue", "scancel"):  # present, never called
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    args = ["run", str(study_file), "--launcher", "slurm", "--workers", "2"]

    assert main([*args, "--results", str(tmp_path / "r")]) == 2

    assert "--workers is for --launcher local" in capsys.readouterr().err


def test_slurms_code_loads_on_the_first_lookup_of_its_name_and_submitit_at_submission():
    """`ablate --help` and `import ablate` pay for no launcher: the registry knows the shipped
    ones by name, and a lookup imports the module that registers one (never submitit)."""
    code = (
        "import sys; import ablate.commands.cli; "
        "loaded = lambda: [m for m in ('ablate.study.slurm', 'submitit') if m in sys.modules]; "
        "before = loaded(); from ablate.launch.registry import launcher_entry; "
        "entry = launcher_entry('slurm'); print(before, loaded(), entry.options.__name__)"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "[] ['ablate.study.slurm'] SlurmOptions"


def test_run_help_lists_the_registered_launchers(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "where the trials run: local, slurm, or a launcher the study file registers" in out
    assert "--launcher-opt" in out and "--slurm-partition" in out


TUNED = """
from ablate.study import Budget, EvalSpec, Study, TuneSpec, arm, log_range

STUDY = Study(
    name="tuned_arr",
    base_models=["hopeless"],
    arms=[arm("grpo", "grpo"), arm("dr_grpo", "dr_grpo")],
    seeds=[0],
    budget=Budget(max_steps=1, prompts_per_step=2, group_size=2, max_new_tokens=8),
    eval=EvalSpec(at_start=False, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    tune=TuneSpec(params={"lr": log_range(1e-6, 1e-4)}, trials=1, steps=1, seeds=(5,),
                  selection_problems=3),
)
"""


@needs_zoo
def test_array_tasks_and_status_find_a_tuned_studys_trials_at_the_chosen_settings(tmp_path, capsys):
    study_file = tmp_path / "tuned_arr.py"
    study_file.write_text(TUNED)
    study = load_study(study_file)
    results = tmp_path / "results"
    assert main(["status", str(study_file), "--results", str(results)]) == 0
    assert "tuning not finished" in capsys.readouterr().out  # said, not a traceback
    launch = array_launcher(study_file, study, SlurmOptions(), cluster="debug", poll_s=0)

    outcomes = run_study(study, results_dir=results, launch=launch)

    # each array task re-loads the study file: untuned, its trials would not be found
    assert sorted(o.outcome for o in outcomes) == ["finished"] * 2
    runs = tracking.open_store(tracking.default_uri(results)).runs("tuned_arr")
    assert set(runs.runs["status"]) == {"FINISHED"}
    assert main(["status", str(study_file), "--results", str(results)]) == 0
    assert capsys.readouterr().out.strip().endswith("2 FINISHED")
