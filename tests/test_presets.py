"""Presets: each differs from GRPO in exactly its documented fields, every value cited."""

from __future__ import annotations

import ast
import inspect
import re

import pytest

import ablate
from ablate.base.errors import ConfigError

# The differences the papers define (see each baselines/ module's citations).
EXPECTED_DIFF = {
    "grpo": set(),
    "maxrl": {"scale"},
    "dppo": {
        "scale",
        "trust_region",
        "clip_low",
        "clip_high",
        "ratio_cap",
        "loss_agg",
        "kl_coef",
        "minibatches",
    },
    "w_reinforce": {
        "baseline",
        "scale",
        "reward_floor",
        "positive_weight",
        "loss_agg",
        "kl_coef",
        "minibatches",
    },
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
    "cispo": {
        "surrogate",
        "clip_low",
        "clip_high",
        "loss_agg",
        "kl_coef",
        "dynamic_sampling",
        "overlong_buffer",
        "minibatches",
    },
    "sapo": {"surrogate", "kl_coef", "minibatches"},
    "gmpo": {"surrogate", "clip_low", "clip_high", "kl_coef"},
    "clip_cov": {
        "surrogate",
        "clip_low",
        "clip_high",
        "loss_agg",
        "kl_coef",
        "dynamic_sampling",
        "minibatches",
    },
    "kl_cov": {
        "surrogate",
        "cov_fraction",
        "loss_agg",
        "kl_coef",
        "dynamic_sampling",
        "minibatches",
    },
    "rloo": {"baseline", "scale", "loss_agg", "kl_coef", "kl_estimator", "kl_in"},
    "reinforce_pp": {"scale", "kl_coef", "kl_estimator"},
    "lite_ppo": {"scale", "loss_agg", "kl_coef", "minibatches"},
    "scalerl": {
        "surrogate",
        "clip_low",
        "clip_high",
        "loss_agg",
        "scale",
        "kl_coef",
        "zero_variance_filter",
        "retire_pass_rate",
    },
}


def test_presets_ship_and_load_by_name():
    assert set(EXPECTED_DIFF) == set(ablate.baseline_names())  # a new preset needs its row here
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

    module = importlib.import_module(f"ablate.baselines.{name}")
    source = inspect.getsource(module)
    lines = source.splitlines()
    call = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and n.keywords)
    for kw in call.keywords:
        line = lines[kw.value.lineno - 1]
        assert "#" in line, f"baselines/{name}.py: {kw.arg} has no comment"
    assert re.search(r"arXiv \d{4}\.\d{5}", module.__doc__ or ""), (
        "module docstring cites the paper"
    )


def test_cispo_is_dapo_with_minimax_truncated_is_weights():
    cispo, dapo = ablate.baseline("cispo"), ablate.baseline("dapo")
    assert set(dapo.diff(cispo)) == {"surrogate", "clip_low", "clip_high"}
    # M1 §3.1: no lower bound on the IS weight (1 - 1 = 0); the cap 1 + 4 = TRL's epsilon_high 5
    assert (cispo.surrogate, cispo.clip_low, cispo.clip_high) == ("cispo", 1.0, 4.0)
    assert cispo.loss_agg == "token_mean" and cispo.kl_coef == 0 and cispo.dynamic_sampling


def test_sapo_and_gmpo_match_their_papers():
    sapo, gmpo = ablate.baseline("sapo"), ablate.baseline("gmpo")
    assert (sapo.surrogate, sapo.sapo_tau_pos, sapo.sapo_tau_neg) == ("sapo", 1.0, 1.05)
    assert sapo.loss_agg == "seq_mean_token_mean" and sapo.minibatches == 4
    assert (gmpo.surrogate, gmpo.clip_low, gmpo.clip_high) == ("gmpo", 0.4, 0.4)  # (e^-.4, e^.4)
    assert gmpo.loss_agg == "seq_mean_token_mean" and gmpo.kl_coef == 0  # one loss per sequence


def test_covariance_presets_match_the_authors_scripts():
    clip_cov, kl_cov = ablate.baseline("clip_cov"), ablate.baseline("kl_cov")
    assert clip_cov.surrogate == "clip_cov"
    assert (clip_cov.cov_fraction, clip_cov.cov_clip_low, clip_cov.cov_clip_high) == (2e-4, 1, 5)
    assert (kl_cov.surrogate, kl_cov.cov_fraction, kl_cov.kl_cov_coef) == ("kl_cov", 2e-3, 1.0)
    for a in (clip_cov, kl_cov):  # verl's DAPO recipe, 256 prompts in mini-batches of 32
        assert a.loss_agg == "token_mean" and a.dynamic_sampling and a.kl_coef == 0
        assert a.minibatches == 8 and a.ppo_epochs == 1


def test_advantage_presets_change_only_the_advantage_and_its_kl():
    rloo, rpp, lite = (ablate.baseline(n) for n in ("rloo", "reinforce_pp", "lite_ppo"))
    assert (rloo.baseline, rloo.scale, rloo.loss_agg) == (
        "leave_one_out",
        "none",
        "seq_mean_token_sum",
    )
    assert (rloo.kl_coef, rloo.kl_estimator, rloo.kl_in) == (0.05, "k1", "reward")
    assert (rpp.baseline, rpp.scale) == ("group_mean", "token_whiten")
    assert (rpp.kl_coef, rpp.kl_estimator, rpp.kl_in) == (0.001, "k2", "loss")
    assert (lite.baseline, lite.scale, lite.loss_agg) == ("group_mean", "batch_std", "token_mean")
    assert (lite.surrogate, lite.clip_low, lite.clip_high, lite.kl_coef) == ("clip", 0.2, 0.2, 0)
    for a in (rloo, rpp, lite):
        assert a.surrogate == "clip" and a.advantage == "group"


def test_scalerl_preset_is_the_papers_recipe():
    s = ablate.baseline("scalerl")
    assert (s.surrogate, s.clip_low, s.clip_high) == ("cispo", 1.0, 4.0)  # ε_max 5, no floor
    assert (s.baseline, s.scale, s.loss_agg) == ("group_mean", "batch_centred_std", "prompt_mean")
    assert s.zero_variance_filter and not s.dynamic_sampling  # drop flat prompts, no refill
    assert s.retire_pass_rate == 0.9 and s.kl_coef == 0
    assert s.updates_per_rollout == 1  # PipelineRL's asynchrony is not modelled
