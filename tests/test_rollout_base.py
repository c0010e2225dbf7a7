"""SamplingParams validation and the Rollouts helpers used by dynamic sampling."""

from __future__ import annotations

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.rollout import RolloutEngine, Rollouts, SamplingParams
from ablate.testing import ScriptedEngine


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": 4, "temperature": -0.5}, "temperature"),
        ({"max_new_tokens": 4, "temperature": float("nan")}, "temperature"),
        ({"max_new_tokens": 4, "top_p": 0.0}, "top_p"),
        ({"max_new_tokens": 4, "top_p": 1.5}, "top_p"),
        ({"max_new_tokens": 4, "top_k": -1}, "top_k"),
        ({"max_new_tokens": 4, "stop": "\n"}, "stop"),
        ({"max_new_tokens": 4, "stop": ("",)}, "stop"),
    ],
)
def test_sampling_params_reject_bad_values(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        SamplingParams(**kwargs)


def test_sampling_params_flags():
    assert SamplingParams(max_new_tokens=1, temperature=0).greedy
    assert not SamplingParams(max_new_tokens=1).filters_distribution
    assert SamplingParams(max_new_tokens=1, top_k=5).filters_distribution
    assert SamplingParams(max_new_tokens=1, stop=["a"]).stop == ("a",)


def scripted(prompts, n, completions, max_new_tokens=8):
    engine = ScriptedEngine(lambda prompt, j, call: completions[j % len(completions)])
    return engine.generate(prompts, n, SamplingParams(max_new_tokens=max_new_tokens))


def test_select_keeps_fields_aligned():
    rollouts = scripted(["p0", "p1"], 2, ["a", "bbb"])
    picked = rollouts.select(torch.tensor([False, True, True, False]))
    assert picked.texts == ["bbb", "a"]
    assert picked.prompts == ["p0", "p1"]
    assert picked.group_ids.tolist() == [0, 1]
    assert picked.lengths.tolist() == [4, 2]  # text + EOS
    assert picked.completion_ids.shape == (2, 4)
    assert rollouts.select([3]).texts == ["bbb"]


def test_concat_repads_and_offsets_groups():
    short = scripted(["p"], 2, ["a"])
    long_ = scripted(["a much longer prompt"], 2, ["abcdef"])
    both = Rollouts.concat([short, long_])
    assert both.num_samples == 4 and both.group_size == 2
    assert both.group_ids.tolist() == [0, 0, 1, 1]
    assert both.prompt_ids.shape[1] == long_.prompt_ids.shape[1]
    assert both.completion_ids.shape[1] == long_.completion_ids.shape[1]
    # Left padding of the shorter prompt, right padding of the shorter completion.
    assert both.prompt_mask[0].tolist()[-2:] == [1, 1] and both.prompt_mask[0, 0] == 0
    assert both.completion_mask[0].tolist()[:3] == [1.0, 1.0, 0.0]
    assert both.texts == ["a", "a", "abcdef", "abcdef"]
    assert torch.equal(both.prompt_ids[0, -2:], short.prompt_ids[0])


def test_group_size_of_unequal_groups_raises():
    rollouts = scripted(["p0", "p1"], 2, ["a"]).select([0, 1, 2])
    with pytest.raises(ValueError, match="unequal"):
        _ = rollouts.group_size


def test_engines_satisfy_the_protocol():
    assert isinstance(ScriptedEngine({}), RolloutEngine)
