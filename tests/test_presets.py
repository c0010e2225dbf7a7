"""Presets: each differs from GRPO in exactly its documented fields, every value cited."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import ablate
from ablate.errors import ConfigError

# The differences the papers define (see each baselines/ module's citations).
EXPECTED_DIFF = {
    "grpo": set(),
    "dr_grpo": {"scale", "loss_agg", "kl_coef"},
    "dapo": {
        "clip_high",
        "loss_agg",
        "kl_coef",
        "dynamic_sampling",
        "overlong_buffer",
        "minibatches",
    },
    "gspo": {"ratio_level", "clip_low", "clip_high", "kl_coef", "minibatches"},
    "ppo": {"advantage", "loss_agg", "kl_coef", "kl_estimator", "kl_in", "ppo_epochs"},
}


def test_presets_ship_and_load_by_name():
    assert set(EXPECTED_DIFF) <= set(ablate.baseline_names())
    with pytest.raises(ConfigError, match=r"valid: .*dapo"):
        ablate.baseline("dapo2")


@pytest.mark.parametrize("name", sorted(EXPECTED_DIFF))
def test_preset_differs_from_grpo_in_exactly_its_documented_fields(name):
    grpo = ablate.baseline("grpo")
    assert set(grpo.diff(ablate.baseline(name))) == EXPECTED_DIFF[name]


def test_dr_grpo_removes_both_std_scaling_and_length_normalisation():
    dr = ablate.baseline("dr_grpo")
    # the bug this guards: a loss-type string that changes aggregation but keeps the std scaling
    assert dr.scale == "none" and dr.loss_agg == "seq_mean_token_sum_norm"
    assert dr.resolve(max_new_tokens=3000).loss_norm_constant == 3000


def test_presets_match_the_papers():
    dapo, gspo, grpo = ablate.baseline("dapo"), ablate.baseline("gspo"), ablate.baseline("grpo")
    assert (dapo.clip_low, dapo.clip_high, dapo.loss_agg) == (0.2, 0.28, "token_mean")
    assert dapo.dynamic_sampling and dapo.kl_coef == 0
    assert dapo.resolve(max_new_tokens=20480).overlong_buffer == 4096
    assert (gspo.ratio_level, gspo.clip_low, gspo.clip_high) == ("sequence", 3e-4, 4e-4)
    assert gspo.minibatches == 4 and gspo.loss_agg == "seq_mean_token_mean"
    assert (grpo.kl_coef, grpo.kl_estimator, grpo.kl_in) == (0.04, "k3", "loss")


def test_ppo_preset_matches_trl_defaults_and_switches_to_group_cleanly():
    import dataclasses

    ppo = ablate.baseline("ppo")
    assert ppo.advantage == "gae" and (ppo.gae_gamma, ppo.gae_lambda) == (1.0, 0.95)
    assert (ppo.vf_coef, ppo.vf_clip, ppo.whiten_advantages) == (0.1, 0.2, True)
    assert (ppo.kl_coef, ppo.kl_estimator, ppo.kl_in, ppo.ppo_epochs) == (0.05, "k1", "reward", 4)
    # the critic's values are the defaults, so "PPO without a critic" is one replace away
    assert dataclasses.replace(ppo, advantage="group").advantage == "group"


@pytest.mark.parametrize("name", sorted(EXPECTED_DIFF))
def test_every_preset_value_carries_a_citation(name):
    import importlib

    module = importlib.import_module(f"baselines.{name}")
    source = inspect.getsource(module)
    lines = source.splitlines()
    call = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and n.keywords)
    for kw in call.keywords:
        line = lines[kw.value.lineno - 1]
        assert "#" in line, f"baselines/{name}.py: {kw.arg} has no comment"
    assert re.search(r"arXiv \d{4}\.\d{5}", module.__doc__ or ""), (
        "module docstring cites the paper"
    )
