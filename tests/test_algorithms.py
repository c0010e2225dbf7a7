"""Algorithm: the factor space, its validation and its registries' contract."""

from __future__ import annotations

import dataclasses
import typing
import warnings

import pytest

from ablate.base.errors import ConfigError
from ablate.base.registry import Registry
from ablate.factors import objective
from ablate.factors.algorithms import Algorithm, field_docs
from ablate.factors.checks import unread_fields
from ablate.stages import shaping

CONTRACT = {
    "baseline",
    "scale",
    "std_unbiased",
    "std_eps",
    "ratio_level",
    "clip_low",
    "clip_high",
    "dual_clip",
    "loss_agg",
    "loss_norm_constant",
    "kl_coef",
    "kl_estimator",
    "kl_in",
    "entropy_coef",
    "dynamic_sampling",
    "max_gen_batches",
    "mask_truncated",
    "overlong_buffer",
    "overlong_penalty",
    "ppo_epochs",
    "minibatches",
    "advantage",
    "gae_gamma",
    "gae_lambda",
    "vf_coef",
    "vf_clip",
    "whiten_advantages",
    "critic_lr",
}


def test_contract_field_names_exist():
    assert {f.name for f in dataclasses.fields(Algorithm)} >= CONTRACT


def test_frozen_and_keyword_only():
    a = Algorithm()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.clip_low = 0.3  # type: ignore[misc]
    with pytest.raises(TypeError):
        Algorithm("group_mean")  # type: ignore[misc]


def test_every_field_has_a_one_line_docstring():
    docs = field_docs()
    for f in dataclasses.fields(Algorithm):
        assert docs.get(f.name), f"{f.name} has no docstring"
        assert "\n" not in docs[f.name]


@pytest.mark.parametrize(
    ("field", "registry"),
    [*objective.FACTORS.items(), ("rollout_correction", shaping.ROLLOUT_CORRECTIONS)],
)
def test_literal_values_equal_registry_names(field, registry):
    hint = typing.get_type_hints(Algorithm)[field]
    assert set(typing.get_args(hint)) == set(registry.names())


def test_all_problems_are_reported_at_once_with_fixes():
    with pytest.raises(ConfigError) as err:
        Algorithm(scale="std", clip_low=1.5, dual_clip=0.5, minibatches=0)
    msg = str(err.value)
    assert "scale='std' is not one of 'group_std', 'batch_std', 'batch_centred_std'" in msg
    assert "clip_low=1.5" in msg and "dual_clip=0.5" in msg and "minibatches=0" in msg


@pytest.mark.parametrize(
    "kwargs",
    [
        {"std_eps": -1.0},
        {"clip_high": float("nan")},
        {"kl_coef": -0.1},
        {"ppo_epochs": 1.5},
        {"std_unbiased": "yes"},
        {"overlong_buffer": -4},
        {"overlong_buffer": "120%"},
        {"overlong_buffer": "20"},
        {"overlong_buffer": None},
        {"loss_norm_constant": 0, "loss_agg": "seq_mean_token_sum_norm"},
        {"max_gen_batches": True},
        {"advantage": "critic"},
        {"advantage": "gae", "gae_lambda": 1.5},
        {"advantage": "gae", "gae_gamma": -0.1},
        {"advantage": "gae", "vf_coef": 0.0},
        {"advantage": "gae", "vf_clip": 0.0},
        {"advantage": "gae", "critic_lr": float("inf")},
        {"advantage": "gae", "whiten_advantages": 1},
    ],
)
def test_bad_values_are_refused(kwargs):
    with pytest.raises(ConfigError):
        Algorithm(**kwargs)


def test_cross_field_rules():
    with pytest.raises(ConfigError) as err:
        Algorithm(loss_norm_constant=100)
    assert (
        "loss_norm_constant=100 does nothing with loss_agg='seq_mean_token_mean' (only "
        "loss_agg='seq_mean_token_sum_norm' reads it); remove it, or use "
        "loss_agg='seq_mean_token_sum_norm'"
    ) in str(err.value)
    with pytest.raises(ConfigError, match="no-op"):
        Algorithm(overlong_buffer=8, overlong_penalty=0.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [("baseline", "leave_one_out"), ("scale", "none"), ("std_unbiased", False), ("std_eps", 1e-4)],
)
def test_group_only_fields_are_refused_with_gae(field, value):
    with pytest.raises(ConfigError) as err:
        Algorithm(advantage="gae", **{field: value})
    msg = str(err.value)
    assert f"{field}={value!r} does nothing with advantage='gae'" in msg
    assert "use advantage='group'" in msg


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gae_gamma", 0.99),
        ("gae_lambda", 1.0),
        ("vf_coef", 0.5),
        ("vf_clip", None),
        ("whiten_advantages", False),
        ("critic_lr", 1e-5),
    ],
)
def test_critic_fields_are_refused_with_group_advantages(field, value):
    with pytest.raises(ConfigError) as err:
        Algorithm(**{field: value})
    msg = str(err.value)
    assert f"{field}={value!r} does nothing with advantage='group' (only advantage='gae'" in msg
    assert "use advantage='gae'" in msg
    assert getattr(Algorithm(advantage="gae", **{field: value}), field) == value


@pytest.mark.parametrize(
    ("surrogate", "field", "value", "readers"),
    [
        ("clip", "sapo_tau_pos", 2.0, "surrogate='sapo'"),
        ("sapo", "clip_high", 0.28, "surrogate='clip', 'cispo', 'gmpo' or 'clip_cov'"),
        ("cispo", "dual_clip", 3.0, "surrogate='clip'"),
        ("kl_cov", "cov_clip_low", 0.5, "surrogate='clip_cov'"),
        ("clip_cov", "kl_cov_coef", 0.5, "surrogate='kl_cov'"),
        ("gmpo", "cov_fraction", 0.1, "surrogate='clip_cov' or 'kl_cov'"),
    ],
)
def test_a_field_the_chosen_surrogate_does_not_read_is_refused(surrogate, field, value, readers):
    with pytest.raises(ConfigError) as err:
        Algorithm(surrogate=surrogate, **{field: value})
    assert (
        f"{field}={value!r} does nothing with surrogate={surrogate!r} (only {readers} reads it)"
    ) in str(err.value)


@pytest.mark.parametrize("scale", ["token_whiten", "none"])
@pytest.mark.parametrize(("field", "value"), [("std_unbiased", False), ("std_eps", 1e-4)])
def test_std_fields_are_refused_with_a_scale_that_takes_no_std(scale, field, value):
    with pytest.raises(ConfigError, match=f"{field}={value!r} does nothing with scale={scale!r}"):
        Algorithm(scale=scale, **{field: value})
    assert getattr(Algorithm(scale="batch_std", **{field: value}), field) == value


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"surrogate": "sapo", "sapo_tau_neg": 0.0}, "sapo_tau_neg=0.0 must be a number > 0 (SAPO"),
        ({"surrogate": "clip_cov", "cov_fraction": 2.0}, "cov_fraction=2.0 must be in (0, 1]"),
        ({"surrogate": "clip_cov", "cov_clip_low": 6.0}, "below cov_clip_high=5.0"),
        ({"surrogate": "kl_cov", "kl_cov_coef": -1.0}, "kl_cov_coef=-1.0 must be a finite"),
        ({"clip_low": 1.0}, "clip_low=1.0 must be a number in [0, 1)"),
        ({"dual_clip": 1.0}, "dual_clip=1.0 must be None (off) or a number > 1"),
    ],
)
def test_ranges_come_from_the_reading_entrys_declaration(kwargs, message):
    with pytest.raises(ConfigError) as err:
        Algorithm(**kwargs)
    assert message in str(err.value)


def test_no_lower_clip_bound_is_accepted_where_the_surrogate_takes_it():
    for surrogate in ("cispo", "clip_cov"):
        assert Algorithm(surrogate=surrogate, clip_low=1.0).clip_low == 1.0


def test_a_bool_set_to_an_int_is_not_taken_for_its_default():
    with pytest.raises(ConfigError, match="whiten_advantages=1 does nothing"):
        Algorithm(whiten_advantages=1)


def test_unread_fields_are_explained_by_the_first_factor_that_ignores_them():
    unread = unread_fields(Algorithm(advantage="gae"))
    assert {"baseline", "scale", "std_unbiased", "std_eps"} <= unread.keys()
    assert unread["std_eps"].factor == "advantage"  # not the scale's: the scale itself is unread
    assert unread_fields(Algorithm(scale="none"))["std_eps"].factor == "scale"
    assert "sapo_tau_pos" in unread_fields(Algorithm()) and "clip_low" not in unread_fields(
        Algorithm()
    )


def test_data_side_factors_stay_available_to_gae():
    # dynamic sampling is a data filter, not part of the group advantage: PPO + DS is an arm
    a = Algorithm(advantage="gae", dynamic_sampling=True, mask_truncated=True, kl_in="reward")
    assert a.dynamic_sampling and a.mask_truncated


def test_advantage_estimators_are_group_and_gae():
    hint = typing.get_type_hints(Algorithm)["advantage"]
    assert set(typing.get_args(hint)) == {"group", "gae"}
    with pytest.raises(ConfigError, match="advantage='ppo' is not one of 'group', 'gae'"):
        Algorithm(advantage="ppo")


def test_sequence_ratio_with_token_summing_aggregation_warns_and_says_why():
    with pytest.warns(UserWarning, match="weighted by their length"):
        Algorithm(ratio_level="sequence", loss_agg="token_mean", minibatches=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Algorithm(ratio_level="sequence", loss_agg="seq_mean_token_mean", minibatches=4)


def test_sequence_ratio_with_one_update_warns_that_it_is_inert():
    with pytest.warns(UserWarning, match="ratio is always 1"):
        Algorithm(ratio_level="sequence")


def test_diff_lists_exactly_the_changed_fields():
    a = Algorithm()
    b = dataclasses.replace(a, clip_high=0.28, dynamic_sampling=True)
    assert a.diff(b) == {"clip_high": (0.2, 0.28), "dynamic_sampling": (False, True)}
    assert a.diff(a) == {}


def test_resolve_fills_budget_dependent_values():
    dr = Algorithm(scale="none", loss_agg="seq_mean_token_sum_norm", overlong_buffer="20%")
    r = dr.resolve(max_new_tokens=80)
    assert r.loss_norm_constant == 80 and r.overlong_buffer == 16  # DAPO's 4096/20480 = 20%
    fixed = dataclasses.replace(dr, loss_norm_constant=3000, overlong_buffer=4).resolve(
        max_new_tokens=80
    )
    assert fixed.loss_norm_constant == 3000 and fixed.overlong_buffer == 4
    assert Algorithm().resolve(max_new_tokens=80).loss_norm_constant is None
    with pytest.raises(ConfigError, match="overlong_buffer=4096 must be smaller"):
        Algorithm(overlong_buffer=4096).resolve(max_new_tokens=80)
    assert Algorithm(overlong_buffer="12.5%").resolve(max_new_tokens=80).overlong_buffer == 10
    assert Algorithm(overlong_buffer="1%").resolve(max_new_tokens=20).overlong_buffer == 1


def test_overlong_buffer_none_is_refused_with_its_new_spelling():
    with pytest.raises(ConfigError, match="overlong_buffer=None is written overlong_buffer='20%'"):
        Algorithm(overlong_buffer=None)


def test_registry_rejects_duplicates_and_lists_valid_names():
    reg: Registry = Registry("widget")
    reg.register("a")(lambda: 1)
    with pytest.raises(ValueError, match="twice"):
        reg.register("a")(lambda: 2)
    with pytest.raises(ConfigError, match="unknown widget 'b'; valid: 'a'"):
        reg.get("b")
    assert reg.names() == ("a",) and "a" in reg and len(reg) == 1
