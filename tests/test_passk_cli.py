"""`ablate passk` end to end with a scripted engine and the toy task."""

from __future__ import annotations

import pandas as pd

from ablate.commands import cli
from ablate.commands import passk as passk_command
from ablate.testing import ScriptedEngine, ToyTask, ToyTemplate
from ablate.trial import passk_sweep


def test_passk_command_prints_and_writes_csv(tmp_path, monkeypatch, capsys):
    template = ToyTemplate()
    right = {template.render(p.question): [f" ={p.answer}\n"] for p in ToyTask().problems()}
    monkeypatch.setattr(passk_sweep, "_resolve_task", lambda name: ToyTask())
    monkeypatch.setattr(passk_sweep, "_resolve_template", lambda name: template)
    monkeypatch.setattr(passk_command, "_make_engine", lambda name, kind: ScriptedEngine(right))
    out = tmp_path / "passk.csv"
    argv = ["passk", "--models", "a", "--templates", "toy", "--task", "toy", "--n", "4"]
    code = cli.main([*argv, "--k", "1,4", "--out", str(out)])
    assert code == 0
    table = pd.read_csv(out)
    assert table.k.tolist() == [1, 4] and (table.pass_at_k == 1.0).all()
    out = capsys.readouterr().out
    assert "pass@k (95% bootstrap CI" in out
    # not a terminal: progress as plain lines, the cell announced before its first batch
    assert "pass@k a × toy: 0/3 prompts" in out and "pass@k a × toy: 3/3 prompts" in out


def test_passk_command_k_above_n_is_a_one_line_error(capsys):
    code = cli.main(["passk", "--models", "a", "--n", "4", "--k", "1,8"])
    assert code == 2
    assert "raise --n" in capsys.readouterr().err
