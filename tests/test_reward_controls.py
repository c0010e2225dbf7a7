"""The reward-control field: its checks, and the one-line error that tells a saved study or config
still setting `random_reward` how to spell it now; the graded control (`noisy`) on a batch of
known correctness. (The other controls' rewards are tested on scripted completions in
test_data_side.py.)"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from ablate import arm
from ablate.base.errors import ConfigError
from ablate.base.records import ScoredBatch
from ablate.base.seeding import derive_seed
from ablate.factors.algorithms import Algorithm
from ablate.factors.overrides import split_overrides
from ablate.factors.reward_controls import REWARD_CONTROLS, DrawKey
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


# --- the graded control: reward_control="noisy" ---------------------------------------------------
def scored(correct: list[bool]) -> ScoredBatch:
    c = torch.tensor(correct)
    return ScoredBatch(rollouts=None, verdicts=[], scores=c.float(), correct=c)


def control(name: str, batch: ScoredBatch, key: DrawKey, **fields) -> torch.Tensor:
    algo = Algorithm(reward_control=name, **fields)
    return REWARD_CONTROLS.get(name)(batch, 4, key, algo)


# 2000 samples, a third of them right, in groups of 4
BATCH = scored([i % 3 == 0 for i in range(2000)])
KEY = DrawKey(seed=5, step=7, attempt=1)


def test_noisy_at_zero_is_the_verifier_and_at_one_the_random_control_draw_for_draw():
    assert torch.equal(control("noisy", BATCH, KEY, reward_noise_fraction=0.0), BATCH.scores)
    for p in (0.5, 0.3):
        noisy = control("noisy", BATCH, KEY, reward_noise_fraction=1.0, reward_control_p=p)
        assert torch.equal(noisy, control("random", BATCH, KEY, reward_control_p=p))


def test_noisy_replaces_a_share_f_of_rewards_by_coins_and_flips_f_times_the_mismatch():
    n, right = 2000, BATCH.scores
    coins = control("random", BATCH, KEY)  # the coin each sample would get
    for f in (0.25, 0.6):
        noisy = control("noisy", BATCH, KEY, reward_noise_fraction=f)
        # every reward is the verifier's or the coin's, and the coin is taken on its own draw
        assert bool(((noisy == right) | (noisy == coins)).all())
        replaced = torch.tensor(
            [
                derive_seed(5, "reward_control", "7", "1", "noise", str(i)) / 2**63 < f
                for i in range(n)
            ]
        )
        assert torch.equal(noisy, torch.where(replaced, coins, right))
        # E[share flipped] = f·P(coin ≠ verifier) = f/2 at p = 0.5 (4 binomial SEs)
        share = (noisy != right).float().mean().item()
        assert abs(share - f / 2) < 4 * math.sqrt(f / 2 * (1 - f / 2) / n), f
    a = control("noisy", BATCH, KEY, reward_noise_fraction=0.5)
    assert torch.equal(a, control("noisy", BATCH, KEY, reward_noise_fraction=0.5))  # seeded
    other = control("noisy", BATCH, DrawKey(seed=6, step=7, attempt=1), reward_noise_fraction=0.5)
    assert not torch.equal(a, other)


def test_reward_noise_fraction_is_read_by_the_noisy_control_only_and_checked():
    with pytest.raises(ConfigError, match=r"reward_noise_fraction=0\.2 does nothing"):
        Algorithm(reward_control="random", reward_noise_fraction=0.2)
    with pytest.raises(
        ConfigError, match=r"reward_noise_fraction=1\.5 must be a share in \[0, 1\]"
    ):
        Algorithm(reward_control="noisy", reward_noise_fraction=1.5)
    assert Algorithm(reward_control="noisy", reward_control_p=0.3).reward_control_p == 0.3
    # its default keeps every other arm's trial id (and the golden traces) as they were
    plain = TrialSpec(algorithm=Algorithm(), model="rl_ready")
    assert (
        plain.id == TrialSpec(algorithm=Algorithm(reward_noise_fraction=0.5), model="rl_ready").id
    )
