"""The labelled best-checkpoint reading: pass@1 on a selection split (eval problems the headline
never reads) logged at every eval, each trial's checkpoint chosen there, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from ablate.base.errors import ConfigError
from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.report.render import checkpoints
from ablate.report.render.tables import TABLES
from ablate.testing import ScriptedEngine, ToyTask, ToyTemplate, study_data
from ablate.trial.evaluation import SELECTION_METRIC, evaluate, selection_split

TASK = ToyTask(pairs=((1, 2), (3, 4), (5, 6), (7, 8)))


def test_selection_pass_at_1_reads_the_eval_problems_after_the_headlines():
    right = {f"Q: {a}+{b}\nA:": [f" ={a + b}\n"] for a, b in TASK.pairs}
    right["Q: 5+6\nA:"] = [" =0\n"]  # the first selection problem is always wrong
    spec = EvalSpec(n_samples=2, ks=(1,), max_problems=2, selection_problems=2)
    metrics, records = evaluate(
        ScriptedEngine(right), TASK, ToyTemplate(), spec, max_new_tokens=16, seed=0
    )
    assert metrics["eval/pass_at_1"] == 1.0  # problems 0, 1
    assert metrics[SELECTION_METRIC] == 0.5  # problems 2 (wrong), 3 (right)
    assert {r["problem_id"] for r in records} == {"toy-eval-0", "toy-eval-1"}
    off, _ = evaluate(
        ScriptedEngine(right),
        TASK,
        ToyTemplate(),
        EvalSpec(n_samples=2, ks=(1,), max_problems=2),
        max_new_tokens=16,
        seed=0,
    )
    assert SELECTION_METRIC not in off


def test_a_selection_split_needs_problems_left_after_the_headlines():
    assert [
        p.id for p in selection_split(TASK, EvalSpec(max_problems=3, selection_problems=5))
    ] == ["toy-eval-3"]
    with pytest.raises(ConfigError, match="no problems after the first 4"):
        selection_split(TASK, EvalSpec(max_problems=4, selection_problems=1))
    assert "selection_problems needs max_problems" in " ".join(
        EvalSpec(selection_problems=8).problems()
    )


def test_each_trial_is_read_at_its_best_selection_checkpoint():
    curves = {
        0: {
            "eval/pass_at_1": {0: 0.2, 10: 0.6, 20: 0.5},
            SELECTION_METRIC: {0: 0.1, 10: 0.7, 20: 0.7},
        },
        1: {
            "eval/pass_at_1": {0: 0.2, 10: 0.4, 20: 0.8},
            SELECTION_METRIC: {0: 0.1, 10: 0.3, 20: 0.6},
        },
        2: {
            "eval/pass_at_1": {0: 0.2, 10: 0.9, 20: 0.3},
            SELECTION_METRIC: {0: 0.1, 10: 0.8, 20: 0.2},
        },
    }
    runs = [("grpo", "m", s, c) for s, c in curves.items()]
    data = study_data(runs, algorithms={"grpo": Algorithm()}, reference="grpo")
    best = checkpoints.best_steps(data.history)
    # seed 0 ties at 10 and 20: the later one; seed 1 its last; seed 2 step 10
    assert best["step"].tolist() == [20, 20, 10]
    (row,) = checkpoints.best_checkpoint_table(data).rows
    assert row["chosen steps"] == "20, 20, 10"
    assert row["pass@1 at best selection checkpoint"].value == pytest.approx((0.5 + 0.8 + 0.9) / 3)
    assert row["final pass@1"].value == pytest.approx((0.5 + 0.8 + 0.3) / 3)
    assert row["best − final"].value == pytest.approx(0.2)
    assert np.isfinite(row["best − final"].low)
    assert checkpoints.has_selection(data)
    spec = next(s for s in TABLES if s.name == "best_checkpoint")
    plain = study_data(
        [("grpo", "m", 0, {"eval/pass_at_1": [0.1, 0.2]})],
        algorithms={"grpo": Algorithm()},
        reference="grpo",
    )
    assert not spec.applies(plain)  # no selection split: no best-checkpoint reading at all
