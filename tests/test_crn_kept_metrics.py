"""Sample metrics are logged on every sample generated in a step (comparable across arms, which
share their first batches), and for dynamic sampling also on the kept, trained batch (`_kept`)."""

from __future__ import annotations

import re

import pytest
import torch

from ablate.factors.advantages import group_advantages
from ablate.factors.algorithms import Algorithm
from ablate.factors.spec import Budget, TrialSpec
from ablate.stages.batch import PromptStream
from ablate.tasks.base import CHARSET
from ablate.tasks.templates import get_template
from ablate.testing import ScriptedEngine, char_tokenizer, tiny_llama
from ablate.trial import TrainState, rl_step, setup_trial

TOK = char_tokenizer(CHARSET)
PLAIN = get_template("plain")
G = 4
#: correct samples of group 0 and group 1 in engine call 0 (attempt 1) and call 1 (attempt 2)
CORRECT = {0: (4, 2), 1: (1, 0)}
#: tokens of every completion of call 0 and of call 1 (EOS included)
TOKENS = {0: 11, 1: 21}


def true_sum(prompt: str) -> int:
    return sum(int(x) for x in re.search(r"Question: ([\d+]+)", prompt).group(1).split("+"))


def planned_script():
    """Completions of planned correctness and length; only call 0's group 0 self-checks."""
    order: dict[int, list[str]] = {}

    def script(prompt: str, j: int, call: int) -> str:
        groups = order.setdefault(call, [])
        if prompt not in groups:
            groups.append(prompt)
        group = groups.index(prompt)
        answer = true_sum(prompt) + (0 if j < CORRECT[call][group] else 1)
        core = ("ck:" if (call, group) == (0, 0) else "") + PLAIN.write_answer(str(answer))
        return ";" * (TOKENS[call] - 1 - len(core)) + core  # the EOS token makes up the rest

    return script


def step_metrics(algo: Algorithm) -> dict[str, float]:
    s = TrialSpec(
        algorithm=algo,
        model="tiny",
        task_options=(("n_train", 64), ("n_eval", 8)),
        budget=Budget(max_steps=1, prompts_per_step=2, group_size=G, max_new_tokens=24),
    )
    script = planned_script()
    setup = setup_trial(
        s,
        loaded=(tiny_llama(0, tokenizer=TOK), TOK),
        engine=lambda m, tok: ScriptedEngine(script, tokenizer=tok),
    )
    return rl_step(setup, TrainState(), PromptStream(setup.task.problems("train"), 0))


def test_dynamic_sampling_logs_all_samples_plainly_and_the_kept_batch_as_kept():
    m = step_metrics(Algorithm(dynamic_sampling=True))
    assert m["budget/gen_batches_step"] == 2 and m["budget/generated_samples"] == 16
    # all 16 samples: groups with 4, 2, 1, 0 of 4 correct; call 0 at 11 tokens, call 1 at 21
    assert m["reward/mean"] == m["reward/accuracy"] == pytest.approx(7 / 16)
    assert m["reward/frac_groups_zero_var"] == pytest.approx(2 / 4)
    assert m["reward/pass_at_G"] == pytest.approx(3 / 4)
    assert m["reward/pass_hat_G"] == pytest.approx(1 / 4)
    assert m["reward/group_var_mean"] == pytest.approx((0 + 0.25 + 0.1875 + 0) / 4)
    assert m["length/mean"] == pytest.approx(16.0)
    assert m["length/correct_mean"] == pytest.approx((6 * 11 + 1 * 21) / 7)
    assert m["length/incorrect_mean"] == pytest.approx((2 * 11 + 7 * 21) / 9)
    assert m["length/self_check_rate"] == pytest.approx(4 / 16)
    # kept 8: call 0's group 1 (2 of 4 correct) and call 1's group 0 (1 of 4); the all-correct
    # and the all-wrong groups are gone, and with them every self-check
    assert m["reward/mean_kept"] == m["reward/accuracy_kept"] == pytest.approx(3 / 8)
    assert m["reward/frac_groups_zero_var_kept"] == 0.0
    assert m["reward/pass_at_G_kept"] == 1.0 and m["reward/pass_hat_G_kept"] == 0.0
    assert m["reward/group_var_mean_kept"] == pytest.approx((0.25 + 0.1875) / 2)
    assert m["length/mean_kept"] == pytest.approx(16.0)
    assert m["length/correct_mean_kept"] == pytest.approx((2 * 11 + 1 * 21) / 3)
    assert m["length/incorrect_mean_kept"] == pytest.approx((2 * 11 + 3 * 21) / 5)
    assert m["length/self_check_rate_kept"] == 0.0
    assert m["entropy/mean"] == m["entropy/mean_kept"] == 1.0  # the scripted engine's entropy
    assert "reward/identical_frac_kept" in m
    # advantages stay on the trained batch: its rewards, not all samples'
    kept = torch.tensor([1.0, 1, 0, 0, 1, 0, 0, 0])
    expected = group_advantages(kept, G, Algorithm(dynamic_sampling=True)).abs().mean().item()
    assert m["policy/adv_abs_mean"] == pytest.approx(expected)


def test_without_dynamic_sampling_there_is_no_kept_copy():
    m = step_metrics(Algorithm())
    assert m["reward/mean"] == pytest.approx(6 / 8)  # attempt 1 only: groups 4 and 2 of 4
    assert m["length/self_check_rate"] == pytest.approx(4 / 8)
    assert not any(key.endswith("_kept") for key in m)
