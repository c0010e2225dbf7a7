"""The reward-control field: its checks, and the one-line error that tells a saved study or config
still setting `random_reward` how to spell it now. (The controls' rewards are tested on scripted
completions in test_data_side.py.)"""

from __future__ import annotations

import dataclasses

import pytest

from ablate import arm
from ablate.base.errors import ConfigError
from ablate.factors.algorithms import Algorithm
from ablate.factors.overrides import split_overrides
from ablate.factors.spec import TrialSpec
from ablate.report.data.load import _algorithm_from

NEW_SPELLING = r"random_reward=0\.5 is now written reward_control='random', reward_control_p=0\.5"


def test_the_old_field_is_refused_with_its_new_spelling_everywhere():
    with pytest.raises(ConfigError, match=NEW_SPELLING):
        Algorithm(random_reward=0.5)
    with pytest.raises(ConfigError, match=NEW_SPELLING):
        dataclasses.replace(Algorithm(), random_reward=0.5)
    with pytest.raises(ConfigError, match=NEW_SPELLING):
        _ = arm("grpo_random", "grpo", random_reward=0.5).algorithm
    with pytest.raises(ConfigError, match="--set " + NEW_SPELLING):
        split_overrides(["random_reward=0.5"])
    with pytest.raises(ConfigError, match="--set " + NEW_SPELLING):
        split_overrides(["algo.random_reward=0.5"])


def test_a_saved_run_with_the_old_field_is_refused_unless_it_was_unset():
    with pytest.raises(ConfigError, match=NEW_SPELLING):
        _algorithm_from({"scale": "none", "random_reward": 0.5})
    assert _algorithm_from({"scale": "none", "random_reward": None}) == Algorithm(scale="none")
    assert "random_reward" not in {f.name for f in dataclasses.fields(Algorithm)}


def test_the_error_is_one_line():
    with pytest.raises(ConfigError) as info:
        Algorithm(random_reward=0.25)
    assert "\n" not in str(info.value)


def test_reward_control_p_is_read_by_the_random_control_only():
    with pytest.raises(ConfigError, match=r"reward_control_p=0\.3 does nothing"):
        Algorithm(reward_control="majority_vote", reward_control_p=0.3)
    with pytest.raises(ConfigError, match=r"reward_control_p=1\.5 must be a probability"):
        Algorithm(reward_control="random", reward_control_p=1.5)
    with pytest.raises(ConfigError, match="reward_control='coin' is not one of"):
        Algorithm(reward_control="coin")


def test_an_arm_without_a_control_keeps_its_trial_id():
    # the new fields default to the old behaviour, so they are not hashed (spec._non_default):
    # ids of unchanged arms, and their finished runs, stay valid without an ID_VERSION bump
    plain = TrialSpec(algorithm=Algorithm(), model="rl_ready")
    explicit = TrialSpec(
        algorithm=Algorithm(reward_control="none", trust_region="ratio_clip", positive_weight=1.0),
        model="rl_ready",
    )
    assert plain.id == explicit.id
    random = TrialSpec(algorithm=Algorithm(reward_control="random"), model="rl_ready")
    assert random.id != plain.id
