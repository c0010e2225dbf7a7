"""The `ablate` command: user errors are one line, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from ablate.commands.cli import main


def test_presets_lists_differences_from_grpo(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "dr_grpo" in out and "seq_mean_token_sum_norm" in out


def test_show_prints_fields_with_their_docs(capsys):
    assert main(["show", "dapo"]) == 0
    out = capsys.readouterr().out
    assert "clip_high" in out and "0.28" in out


def test_unknown_preset_is_one_clear_line(capsys):
    assert main(["show", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown preset 'nope'") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_usage_error_exit_code(capsys):
    assert main(["no-such-command"]) == 2


def test_train_command_runs_a_trial_and_prints_the_final_eval(capsys):
    args = [
        "train",
        "--algo",
        "dr_grpo",
        "--model",
        "rl_ready",
        "--steps",
        "2",
        "--eval-problems",
        "2",
        "--set",
        "minibatches=2",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "finished" in out and "eval/pass_at_1" in out


def test_train_command_rejects_an_unknown_field(capsys):
    assert main(["train", "--algo", "grpo", "--set", "clip=0.3", "--steps", "1"]) == 2
    assert "error: --set" in capsys.readouterr().err


def test_a_diverged_train_exits_non_zero(capsys):
    args = ["train", "--lr", "1e6", "--steps", "3", "--eval-problems", "4"]
    assert main(args) == 1
    assert "diverged at step" in capsys.readouterr().out


STUDY_HEAD = "from ablate.study import Study, arm\n\n"
STUDY_X = "STUDY = Study(name='x', base_models=['rl_ready'], "
BROKEN_STUDIES = [
    (
        "STUDY = Study(name='x', base_models=['rl_ready'], arms=[arm('a', 'grpo')]\nx = = 1\n",
        3,
        "SyntaxError: '(' was never closed",
    ),
    (
        "STUDY = Study(\n    nmae='x',\n    base_models=['rl_ready'],\n    arms=[],\n)\n",
        3,
        "TypeError: Study.__init__() got an unexpected keyword argument 'nmae' "
        "(did you mean name?)",
    ),
    (
        f"{STUDY_X}arms=[arm('a', 'grpo', clip_hihg=0.3)])\n",
        3,
        "arm 'a': 'clip_hihg' is not a factor (did you mean clip_high?)",
    ),
    (
        "SEEDS = [0, 1]\n\n\ndef seeds():\n    return SEEDS[5]\n\n\n"
        f"{STUDY_X}arms=[arm('a', 'grpo')], seeds=seeds())\n",
        7,
        "IndexError: list index out of range",
    ),
    (
        f"{STUDY_X}arms=[arm('a', 'grpo'), arm('a', 'grpo')])\n",
        3,
        "study 'x': duplicate arm names ['a']",
    ),
]


@pytest.mark.parametrize(
    ("body", "line", "message"),
    BROKEN_STUDIES,
    ids=["syntax", "misspelled-study-field", "misspelled-arm-field", "raises", "duplicate-arm"],
)
def test_a_broken_study_file_is_one_line_with_its_line(tmp_path, capsys, body, line, message):
    study = tmp_path / "study.py"
    study.write_text(STUDY_HEAD + body)
    results = tmp_path / "results"
    assert main(["run", str(study), "--results", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {study}:{line}: {message}"), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not results.exists()


def test_report_of_a_study_that_never_ran_creates_nothing(tmp_path, capsys):
    results, out = tmp_path / "results", tmp_path / "reports"
    study = str(Path(__file__).parents[1] / "studies" / "quickstart.py")
    assert main(["report", study, "--results", str(results), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no runs of study 'quickstart' in ") and "run it first" in err
    assert len(err.strip().splitlines()) == 1
    assert not results.exists() and not out.exists()


def test_report_of_a_database_without_the_study_says_so(tmp_path, capsys):
    from ablate import tracking

    results, out = tmp_path / "results", tmp_path / "reports"
    tracking.open_store(tracking.default_uri(results)).init()  # a database, no runs
    study = str(Path(__file__).parents[1] / "studies" / "quickstart.py")
    assert main(["report", study, "--results", str(results), "--out", str(out)]) == 2
    assert "no runs of study 'quickstart'" in capsys.readouterr().err
    assert not out.exists()


def test_summary_counts_a_diverged_seed_as_zero_and_says_so(tmp_path, capsys, monkeypatch):
    from ablate.commands.run import print_summary
    from ablate.study import Study, arm
    from ablate.tracking import RunRecord, RunTable
    from ablate.tracking.mlflow import MLflowStore

    cells = [(0.6, "finished", "a"), (0.55, "diverged", "a"), (0.5, "diverged", "a")]
    cells.append((0.4, "finished", "b"))
    tags = {"ablate.model": "rl_ready", "ablate.template": "plain"}
    runs = RunTable.from_records(
        RunRecord(
            f"r{i}",
            "FINISHED",
            tags={**tags, "ablate.outcome": outcome, "ablate.arm": arm_},
            metrics={"eval/pass_at_1": value},
        )
        for i, (value, outcome, arm_) in enumerate(cells)
    )
    monkeypatch.setattr(MLflowStore, "runs", lambda self, name: runs)
    study = Study(name="s", base_models=["rl_ready"], arms=[arm("a", "grpo"), arm("b", "grpo")])
    print_summary(study, [], str(tmp_path))
    rows = {
        line.split()[1]: line for line in capsys.readouterr().out.splitlines() if "plain" in line
    }
    assert "0.200 [0.000, 0.600]" in rows["a"] and "2/3 diverged" in rows["a"]
    assert "0.400 [0.400, 0.400]" in rows["b"] and "diverged" not in rows["b"]
