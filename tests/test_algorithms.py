"""Algorithm: the factor space, its validation and its registries' contract."""

from __future__ import annotations

import dataclasses
import typing
import warnings

import pytest

from ablate import objective
from ablate.algorithms import Algorithm, field_docs
from ablate.errors import ConfigError
from ablate.registry import Registry

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
    [
        ("baseline", objective.BASELINES),
        ("scale", objective.SCALES),
        ("ratio_level", objective.RATIOS),
        ("loss_agg", objective.AGGREGATIONS),
        ("kl_estimator", objective.KL_ESTIMATORS),
    ],
)
def test_literal_values_equal_registry_names(field, registry):
    hint = typing.get_type_hints(Algorithm)[field]
    assert set(typing.get_args(hint)) == set(registry.names())


def test_all_problems_are_reported_at_once_with_fixes():
    with pytest.raises(ConfigError) as err:
        Algorithm(scale="std", clip_low=1.5, dual_clip=0.5, minibatches=0)
    msg = str(err.value)
    assert "scale='std' is not one of 'group_std', 'batch_std', 'none'" in msg
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
        {"loss_norm_constant": 0, "loss_agg": "seq_mean_token_sum_norm"},
        {"max_gen_batches": True},
    ],
)
def test_bad_values_are_refused(kwargs):
    with pytest.raises(ConfigError):
        Algorithm(**kwargs)


def test_cross_field_rules():
    with pytest.raises(ConfigError, match="only applies to loss_agg='seq_mean_token_sum_norm'"):
        Algorithm(loss_norm_constant=100)
    with pytest.raises(ConfigError, match="no-op"):
        Algorithm(overlong_buffer=8, overlong_penalty=0.0)


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
    dr = Algorithm(scale="none", loss_agg="seq_mean_token_sum_norm", overlong_buffer=None)
    r = dr.resolve(max_new_tokens=80)
    assert r.loss_norm_constant == 80 and r.overlong_buffer == 16  # DAPO's 4096/20480 = 20%
    fixed = dataclasses.replace(dr, loss_norm_constant=3000, overlong_buffer=4).resolve(
        max_new_tokens=80
    )
    assert fixed.loss_norm_constant == 3000 and fixed.overlong_buffer == 4
    assert Algorithm().resolve(max_new_tokens=80).loss_norm_constant is None
    with pytest.raises(ConfigError, match="overlong_buffer=4096 must be smaller"):
        Algorithm(overlong_buffer=4096).resolve(max_new_tokens=80)


def test_registry_rejects_duplicates_and_lists_valid_names():
    reg: Registry = Registry("widget")
    reg.register("a")(lambda: 1)
    with pytest.raises(ValueError, match="twice"):
        reg.register("a")(lambda: 2)
    with pytest.raises(ConfigError, match="unknown widget 'b'; valid: 'a'"):
        reg.get("b")
    assert reg.names() == ("a",) and "a" in reg and len(reg) == 1
