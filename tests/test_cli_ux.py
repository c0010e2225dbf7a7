"""What a new user sees: help texts, `--set` of trial settings, titles, warnings, the summary's
browse hint, and plain progress lines when output is not a terminal."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from ablate.base.errors import AblateWarning, ConfigError
from ablate.commands.cli import main
from ablate.commands.progress import StepLines
from ablate.commands.train import _trial_spec


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["zoo", "build", "--help"]])
def test_help_shows_no_value_type_beside_flags(capsys, monkeypatch, argv):
    monkeypatch.setenv("COLUMNS", "120")
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "--help" in out and "<bool>" not in out
    if argv[0] == "train":
        assert "--set" in out and "NAME=VALUE" in out and "<list[str]>" not in out
        assert "grad_clip" in out and "eval.FIELD" in out  # --set reaches trial settings


def test_ui_and_serve_are_one_command_and_say_so(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--help"]) == 0
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines() if "│ " in line}
    assert "Browse a results folder in the MLflow UI" in lines["ui"]
    assert "Alias of `ablate ui`" in lines["serve"]


def test_set_reaches_algorithm_optimiser_budget_and_eval_settings():
    items = ["scale=none", "lr=1e-5", "grad_clip=0", "group_size=4", "eval.max_problems=8"]
    spec = _trial_spec("grpo", "rl_ready", "arithmetic", "plain", 3, 50, 3e-5, 0, 64, items)
    assert spec.algorithm.scale == "none" and spec.seed == 3
    assert spec.optim.lr == 1e-5 and spec.optim.grad_clip == 0.0
    assert isinstance(spec.optim.grad_clip, float)  # an int literal for a float setting
    assert spec.budget.group_size == 4 and spec.budget.max_steps == 50
    assert spec.eval.max_problems == 8
    # --set wins over the option it repeats
    spec = _trial_spec("grpo", "rl_ready", "arithmetic", "plain", 0, 50, 3e-5, 0, 64, ["lr=1e-4"])
    assert spec.optim.lr == 1e-4


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("clip=0.3", "unknown setting 'clip'; did you mean"),
        ("lr=fast", "--set lr='fast': lr takes float, got str"),
        ("max_problems=8", "an eval setting needs its prefix: eval.max_problems"),
        ("optim.lrr=1", "optim has no setting 'lrr'; did you mean lr?"),
        ("trainer.lr=1", "unknown prefix 'trainer'"),
        ("group_size=4.5", "group_size takes int, got float"),
        ("lr", "--set expects name=value"),
    ],
)
def test_a_bad_set_is_one_line_naming_the_setting(capsys, item, message):
    assert main(["train", "--set", item, "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --set") and message in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_bad_trial_setting_value_is_refused_before_training():
    with pytest.raises(ConfigError, match=r"lr=-1\.0 must be > 0"):
        _trial_spec("grpo", "rl_ready", "arithmetic", "plain", 0, 5, 3e-5, 0, 64, ["lr=-1"])


def test_train_prints_plain_lines_its_overrides_and_each_warning_once(capsys):
    """Output captured (not a terminal): a line per step with reward, tokens and s/step, the
    title with the overrides, the sequence-ratio warning once and without a source location."""
    argv = ["train", "--algo", "gspo", "--steps", "3", "--eval-problems", "2", "--eval-every", "2"]
    assert main([*argv, "--set", "minibatches=1", "--log-every", "2"]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if " s/step" in line]
    assert [line.split(": step ")[1].split()[0] for line in lines] == ["2/3", "3/3"]
    assert "gspo [minibatches=1] seed 0: step 2/3  reward " in lines[0]
    assert "pass@1 " in lines[0] and "pass@1" not in lines[1]  # the eval at step 2 only
    assert "tokens " in lines[0]
    assert "gspo [minibatches=1] on rl_ready (plain), seed 0: finished" in captured.out
    assert captured.err.count("the ratio is always 1") == 1, captured.err
    assert "dataclasses.py" not in captured.err and captured.err.startswith("warning: ")


def test_an_inert_factor_warning_points_at_the_callers_line():
    import ablate

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataclasses.replace(ablate.baseline("gspo"), minibatches=1)
    (warning,) = [w for w in caught if issubclass(w.category, AblateWarning)]
    assert warning.filename == __file__


def test_step_lines_every_n_steps_at_evals_and_at_the_end():
    out: list[str] = []
    lines = StepLines(every=3, write=out.append)
    lines.start("a")
    for step in range(1, 8):
        metrics = {"reward/mean": 0.5, "budget/wall_seconds": 2.0 * step}
        if step == 5:
            metrics["eval/pass_at_1"] = 0.25
        lines(step, 7, {**metrics, "budget/generated_tokens": 1000.0 * step})
    assert [line.split()[2] for line in out] == ["3/7", "5/7", "6/7", "7/7"]
    assert out[0] == "a: step 3/7  reward 0.500  tokens 3,000  2.00 s/step"
    assert "pass@1 0.250" in out[1]


def test_summary_names_the_results_folder_to_browse(tmp_path, capsys, monkeypatch):
    from ablate.commands.run import print_summary
    from ablate.study import Study, arm
    from ablate.tracking import RunTable
    from ablate.tracking.mlflow import MLflowStore

    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.setattr(MLflowStore, "runs", lambda self, name: RunTable.from_records([]))
    study = Study(name="s", base_models=["rl_ready"], arms=[arm("a", "grpo")])
    results = tmp_path / "my results"
    print_summary(study, [], str(results))
    out = capsys.readouterr().out
    assert f"browse: ablate ui --results '{results}'" in out and "make ui" not in out
    print_summary(study, [], str(results), "http://10.0.0.2:5000")
    assert "browse: open http://10.0.0.2:5000" in capsys.readouterr().out
