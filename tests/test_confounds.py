"""Which fields two arms differ in (inert ones ignored) and which differences go undeclared."""

from __future__ import annotations

import dataclasses

from ablate.baselines import baseline
from ablate.factors import confounds

GRPO = baseline("grpo")


def test_differing_fields_ignore_settings_that_do_nothing_in_either_arm():
    no_kl = dataclasses.replace(GRPO, kl_coef=0.0)
    # a KL estimator differs, but neither arm has a KL term: no difference
    assert confounds.differing_fields(no_kl, dataclasses.replace(no_kl, kl_estimator="k1")) == []
    # with KL on in one arm, both kl_coef and the estimator matter
    assert confounds.differing_fields(dataclasses.replace(no_kl, kl_estimator="k1"), GRPO) == [
        "kl_coef",
        "kl_estimator",
    ]
    # group-advantage settings mean nothing to two critic arms
    ppo = baseline("ppo")
    assert confounds.differing_fields(ppo, dataclasses.replace(ppo, max_gen_batches=3)) == []
    assert confounds.differing_fields(GRPO, baseline("dr_grpo")) == ["scale", "loss_agg", "kl_coef"]


def test_schedule_and_kl_in_words():
    assert confounds.schedule(baseline("dapo")) == "16 updates (1 epoch x 16 minibatches)"
    assert confounds.schedule(GRPO) == "1 update (1 epoch x 1 minibatch)"
    assert confounds.kl_setting(GRPO) == "0.04 k3 in the loss (reference model)"
    assert confounds.kl_setting(baseline("dapo")) == "none (no reference model)"


def test_undeclared_names_each_confound_group_once_unless_the_arm_sets_it():
    dapo = baseline("dapo")
    out = confounds.undeclared("dapo", dapo, (), "grpo", GRPO)
    assert len(out) == 2 and "update schedule" in out[0] and "KL term" in out[1]
    assert confounds.undeclared("dapo", dapo, ("minibatches", "kl_coef"), "grpo", GRPO) == []
    # same schedule and KL: nothing to say whatever else differs
    matched = dataclasses.replace(dapo, minibatches=1, kl_coef=0.04)
    assert confounds.undeclared("dapo", matched, (), "grpo", GRPO) == []
