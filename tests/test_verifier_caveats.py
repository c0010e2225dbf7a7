"""A verifier error or timeout is never silent: the report's caveats name the arm, its trials
and the samples scored 0 that way (training's running count, every eval's own)."""

from __future__ import annotations

import pandas as pd

from ablate.report.claims.sentences import verifier_caveats


def history(*rows: tuple) -> pd.DataFrame:
    keys = ("arm", "trial_id", "metric", "step", "value")
    frame = pd.DataFrame([dict(zip(keys, row, strict=True)) for row in rows])
    return frame.assign(model="m", template="plain", seed=0)


def test_each_arm_with_verifier_errors_is_named_with_its_trials_and_samples():
    said = verifier_caveats(
        history(
            ("grpo", "t1", "budget/verifier_errors", 1, 2),
            ("grpo", "t1", "budget/verifier_errors", 3, 5),  # a running count: 5, not 7
            ("grpo", "t1", "eval/verifier_errors", 2, 1),
            ("grpo", "t1", "eval/verifier_errors", 4, 2),  # each eval its own: 3
            ("grpo", "t2", "budget/verifier_errors", 3, 0),
            ("grpo", "t2", "eval/verifier_errors", 4, 4),
            ("dr_grpo", "t3", "budget/verifier_errors", 3, 0),
            ("dr_grpo", "t3", "eval/verifier_errors", 4, 0),
            ("dr_grpo", "t3", "eval/pass_at_1", 4, 0.5),
        )
    )
    assert len(said) == 1  # dr_grpo had none
    assert said[0].startswith("2 of 2 grpo trials had verifier errors or timeouts")
    assert "(5 training and 7 eval samples, scored 0" in said[0]


def test_a_study_without_verifier_errors_has_no_such_caveat():
    clean = history(("grpo", "t1", "budget/verifier_errors", 3, 0), ("grpo", "t1", "x", 1, 1.0))
    assert verifier_caveats(clean) == []
    assert verifier_caveats(history(("grpo", "t1", "eval/pass_at_1", 1, 0.5))) == []
