"""`batch.sample_and_verify`: the one place that samples and verifies (training, held-out eval,
the Pass@G sweep and zoo measurement), and the pass@k helpers every caller shares."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ablate.base.passk import mean_pass_at_k, pass_at_k, pass_at_k_per_problem
from ablate.base.records import SamplingParams
from ablate.rollout.sample import correct_matrix, sample_and_verify
from ablate.testing import ScriptedEngine, ToyTask, ToyTemplate

TEMPLATE = ToyTemplate()
TASK = ToyTask()
PROBLEMS = TASK.problems("eval")
SCRIPT = {
    TEMPLATE.render("1+2"): [" =3\n", " =4\n", " =3\n"],
    TEMPLATE.render("3+4"): [" =0\n", " =7\n", "boom"],
    TEMPLATE.render("5+6"): [" =1\n", " =2\n", " =3\n"],
}


class RecordingEngine(ScriptedEngine):
    def __init__(self, script) -> None:
        super().__init__(script)
        self.seen: list[tuple[list[str], int, SamplingParams, list[str] | None]] = []

    def generate(self, prompts, n, sampling, *, problem_ids=None):
        self.seen.append((list(prompts), n, sampling, list(problem_ids or [])))
        return super().generate(prompts, n, sampling, problem_ids=problem_ids)


def test_one_generate_call_with_the_given_sampling_then_one_verdict_per_sample():
    engine = RecordingEngine(SCRIPT)
    sampling = SamplingParams(max_new_tokens=8, stop=("\n",), seed=17)
    batch = sample_and_verify(engine, PROBLEMS, TEMPLATE, TASK, sampling, n=3)
    assert len(engine.seen) == 1
    prompts, n, used, ids = engine.seen[0]
    assert prompts == [TEMPLATE.render(p.question) for p in PROBLEMS]
    assert (n, used, ids) == (3, sampling, [p.id for p in PROBLEMS])
    assert batch.correct.tolist() == [True, False, True, False, True, False] + [False] * 3
    assert batch.scores.tolist() == [float(c) for c in batch.correct.tolist()]
    assert [v.error is not None for v in batch.verdicts] == [False] * 5 + [True] + [False] * 3
    assert batch.generated is None and batch.gen_batches == 1
    matrix = correct_matrix(batch, 3)
    assert matrix.shape == (3, 3) and matrix.dtype == bool
    assert matrix.sum(axis=1).tolist() == [2, 1, 0]


def test_mean_pass_at_k_is_the_per_problem_estimator_averaged():
    correct = np.array([[1, 1, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0]], dtype=bool)
    for k in (1, 2, 4):
        per_problem = pass_at_k(np.full(3, 4), correct.sum(axis=1), k)
        assert np.array_equal(pass_at_k_per_problem(correct, k), per_problem)
        assert mean_pass_at_k(correct, k) == float(np.mean(per_problem))
    assert mean_pass_at_k(correct, 2) == pytest.approx((5 / 6 + 1 / 2 + 0) / 3)
    assert math.isnan(mean_pass_at_k(np.zeros((0, 4), dtype=bool), 1))
