"""Model FLOPs from the architecture (`ablate.stages.compute`), by hand and as a trial logs them."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ablate.base.records import Rollouts
from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.stages.compute import (
    Shape,
    StepPasses,
    Work,
    forward_flops,
    model_shape,
    rollout_work,
    step_flops,
)
from ablate.testing import tiny_llama
from ablate.tracking import MemoryTracker
from ablate.trial import train


def rollouts(prompt_rows: list[list[int]], completion_lengths: list[int]) -> Rollouts:
    """Left-padded prompts (0 = padding) and completions of the given lengths (width 3)."""
    mask = torch.tensor([[int(t != 0) for t in row] for row in prompt_rows])
    b, t = len(prompt_rows), 3
    completion_mask = torch.tensor([[float(i < n) for i in range(t)] for n in completion_lengths])
    return Rollouts(
        prompt_ids=torch.tensor(prompt_rows),
        prompt_mask=mask,
        completion_ids=torch.ones(b, t, dtype=torch.long),
        completion_mask=completion_mask,
        logprobs=torch.zeros(b, t),
        entropy=torch.zeros(b, t),
        lengths=torch.tensor(completion_lengths),
        truncated=torch.zeros(b, dtype=torch.bool),
        group_ids=torch.arange(b) // 2,
        problem_ids=[str(i // 2) for i in range(b)],
        prompts=[""] * b,
        texts=[""] * b,
        logprobs_exact=True,
    )


#: two groups of two: prompts of 3 and 2 tokens, completions of 2, 1, 3 and 0 tokens
BATCH = rollouts([[5, 6, 7], [5, 6, 7], [0, 8, 9], [0, 8, 9]], [2, 1, 3, 0])


def test_rollout_work_by_hand():
    # tokens: prompts once per group (3 + 2) + completions (2 + 1 + 3 + 0)
    # pairs: prompts 3·4/2 + 2·3/2 = 9; completions c·p = 2·3 + 1·3 + 3·2 = 15, plus c(c+1)/2
    # among themselves = 3 + 1 + 6 = 10
    assert rollout_work(BATCH) == Work(tokens=11, head_tokens=6, pairs=34)


def test_forward_flops_by_hand():
    shape = Shape(body_weights=10, head_weights=2, layers=3, attention_width=4)
    assert forward_flops(shape, Work(11, 6, 34)) == 2 * 10 * 11 + 2 * 2 * 6 + 4 * 3 * 4 * 34


def test_model_shape_reads_the_architecture():
    shape = model_shape(tiny_llama(0, vocab=104))  # the zoo's 0.53M Llama
    per_layer = 4 * 128 * 128 + 3 * 128 * 512  # q, k, v, o and the SwiGLU MLP
    assert shape == Shape(2 * per_layer, 128 * 104, 2, 4 * 32)


def test_step_flops_counts_each_pass():
    shape = Shape(10, 2, 3, 4)
    f = forward_flops(shape, rollout_work(BATCH))
    critic = 2 * 5 * 6  # 5 head weights on the 6 completion tokens
    assert step_flops(shape, BATCH, BATCH, StepPasses(False, False, 0)) == (f, 0.0)
    assert step_flops(shape, BATCH, BATCH, StepPasses(False, False, 1)) == (f, 3 * f)
    assert step_flops(shape, BATCH, BATCH, StepPasses(True, True, 2)) == (f, 2 * f + 6 * f)
    got = step_flops(shape, BATCH, BATCH, StepPasses(True, False, 1, critic_weights=5))
    assert got == (f, (f + critic) + 3 * (f + critic))


def _trace(**algo) -> MemoryTracker:
    tracker = MemoryTracker()
    spec = TrialSpec(
        algorithm=Algorithm(**algo),
        model="tiny",
        task_options=(("n_train", 32), ("n_eval", 4)),
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=4, max_new_tokens=12),
        eval=EvalSpec(max_problems=2, n_samples=2, ks=(1, 2)),
    )
    tok = _tokenizer()
    train(spec, tracker=tracker, loaded=(tiny_llama(0, tokenizer=tok), tok))
    return tracker


def _tokenizer():
    from ablate.tasks.base import CHARSET
    from ablate.testing import char_tokenizer

    return char_tokenizer(CHARSET)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_trial_logs_cumulative_flops_and_a_reference_costs_one_forward():
    plain, with_ref = _trace(kl_coef=0.0), _trace(kl_coef=0.1)
    total = dict(plain.history("perf/model_flops"))
    gen, upd = dict(plain.history("perf/generate_flops")), dict(plain.history("perf/train_flops"))
    assert total[2] > total[1] > 0 and total[2] == gen[2] + upd[2]
    # step 1 draws the same batch in both arms (common random numbers): the reference's one
    # no-grad forward is a third of the policy's forward + backward (3 forwards)
    ref_upd = dict(with_ref.history("perf/train_flops"))
    assert ref_upd[1] == pytest.approx(upd[1] * 4 / 3, rel=1e-12)
    assert dict(with_ref.history("perf/generate_flops"))[1] == gen[1]


def test_old_checkpoint_state_without_flops_still_loads():
    from ablate.trial import TrainState

    saved = TrainState().as_dict()
    del saved["generate_flops"], saved["train_flops"]
    assert TrainState.from_dict(saved).axes() == {"tokens": 0.0, "flops": 0.0}
    assert dataclasses.fields(TrainState)  # the dataclass, not a dict
