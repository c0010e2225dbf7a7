"""The `ablate` command: user errors are one line, never a traceback."""

from __future__ import annotations

from ablate.cli import main


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
