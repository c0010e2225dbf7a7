"""A new advantage estimator touches two files: factors/estimators.py (the class, registered with
the fields it reads) and factors/algorithms.py (its name in `AdvantageName` and its parameter's
field). Here a throwaway estimator with one new parameter is registered through the public
registry API, and a test-only `Algorithm` subclass stands for the algorithms.py edit: the
checks, the trainer (sample -> shape -> estimate -> update) and the logged metrics pick it up with
no other edit."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import Estimate
from ablate.base.registry import FieldRule, finite
from ablate.factors.algorithms import AdvantageName, Algorithm
from ablate.factors.estimators import ESTIMATORS, GroupEstimator, make_estimator
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.tasks.base import CHARSET
from ablate.tasks.templates import get_template
from ablate.testing import ScriptedEngine, char_tokenizer, tiny_llama
from ablate.tracking import MemoryTracker
from ablate.trial import train

WITH_MEDIAN = (*get_args(AdvantageName), "median")


@dataclass(frozen=True, kw_only=True)
class MedianAlgorithm(Algorithm):
    """`Algorithm` after the algorithms.py edit."""

    advantage: Literal[WITH_MEDIAN] = "group"
    """Advantage estimator (one more value)."""
    median_gain: float = 1.0
    """Median: advantages are (reward - the group's median) times this."""


@pytest.fixture
def median(monkeypatch):
    """The estimators.py edit; the registry's tables are copies, restored after the test."""
    monkeypatch.setattr(ESTIMATORS, "_table", dict(ESTIMATORS._table))
    monkeypatch.setattr(ESTIMATORS, "_reads", dict(ESTIMATORS._reads))
    gain = FieldRule("median_gain", lambda v, a: finite(v) and v > 0, "must be a number > 0")

    @ESTIMATORS.register("median", reads=(gain,))
    class MedianEstimator(GroupEstimator):
        """Reward minus the group's median, times `median_gain` (no scale)."""

        def estimate(self, batch, readout):
            groups = batch.rewards.view(-1, self.group_size)
            centred = groups - groups.median(dim=1, keepdim=True).values
            return Estimate((self.algo.median_gain * centred).view(-1))

        def step_metrics(self):
            return {"critic/median_calls": 1.0}

    return MedianEstimator


def test_the_checks_derive_from_the_new_declaration(median):
    assert MedianAlgorithm(advantage="median", median_gain=2.0).median_gain == 2.0
    with pytest.raises(ConfigError) as err:
        MedianAlgorithm(median_gain=2.0)
    assert (
        "median_gain=2.0 does nothing with advantage='group' (only advantage='median' reads "
        "it); remove it, or use advantage='median'"
    ) in str(err.value)
    with pytest.raises(ConfigError, match=r"median_gain=0.0 must be a number > 0"):
        MedianAlgorithm(advantage="median", median_gain=0.0)
    # the group estimator's own fields are unread by the new one, so changing them is refused
    with pytest.raises(ConfigError, match=r"scale='none' does nothing with advantage='median'"):
        MedianAlgorithm(advantage="median", scale="none")


def test_make_estimator_builds_the_new_entry_by_name(median):
    algo = MedianAlgorithm(advantage="median", median_gain=2.0)
    est = make_estimator(algo, group_size=4, hidden_size=8)
    assert isinstance(est, median) and est.head is None and est.param_groups(1e-3) == []


TOK = char_tokenizer(CHARSET)
PLAIN = get_template("plain")


def _mixed(prompt: str, j: int, call: int) -> str:
    """Even samples correct, odd ones off by one: every group is informative."""
    answer = sum(int(x) for x in re.search(r"Question: ([\d+]+)", prompt).group(1).split("+"))
    return " 1+2=3;" + PLAIN.write_answer(str(answer + j % 2))


def test_a_trial_trains_with_the_new_estimator_and_logs_its_metrics(median):
    spec = TrialSpec(
        algorithm=MedianAlgorithm(advantage="median", median_gain=2.0),
        model="tiny",
        task_options=(("n_train", 64), ("n_eval", 8)),
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=4, max_new_tokens=24),
        eval=EvalSpec(max_problems=4, n_samples=2, ks=(1, 2), at_start=False),
    )
    before = {k: v.clone() for k, v in tiny_llama(0, tokenizer=TOK).state_dict().items()}
    model = tiny_llama(0, tokenizer=TOK)
    tracker = MemoryTracker()
    result = train(
        spec,
        tracker=tracker,
        loaded=(model, TOK),
        engine=lambda m, tok: ScriptedEngine(_mixed, tokenizer=tok),
    )
    assert result.outcome == "finished"
    assert [s for s, _ in tracker.history("critic/median_calls")] == [1, 2]
    # rewards 1, 0, 1, 0 in every group: torch's median is the lower middle value, 0, so the
    # advantages are 2 · (1 - 0) = 2 and 0 (the group estimator's would be ±0.87 with its std)
    assert tracker.last("policy/adv_abs_mean") == pytest.approx(1.0)
    assert tracker.last("policy/adv_max") == pytest.approx(2.0)
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
