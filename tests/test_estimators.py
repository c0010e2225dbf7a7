"""The advantage-estimator interface: each registered estimator against its formula, and a new
estimator trains through the unchanged trainer and update loop (no branch on the estimator)."""

from __future__ import annotations

from typing import get_args

import pytest
import torch
from torch import nn

from ablate.base.records import ShapedBatch
from ablate.factors.advantages import group_advantages
from ablate.factors.algorithms import AdvantageName, Algorithm
from ablate.factors.estimators import ESTIMATORS, GroupEstimator, make_estimator, value_head
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.tasks.base import CHARSET
from ablate.testing import ScriptedEngine, char_tokenizer, cycle_script, tiny_llama
from ablate.tracking import MemoryTracker
from ablate.trial import train

TOK = char_tokenizer(CHARSET)


def test_every_advantage_value_has_exactly_one_estimator():
    assert set(ESTIMATORS.names()) == set(get_args(AdvantageName))


def _shaped(rewards: torch.Tensor, lengths: list[int], t: int = 4) -> ShapedBatch:
    mask = (torch.arange(t) < torch.tensor(lengths).unsqueeze(-1)).float()
    groups = torch.arange(len(lengths)) // 2
    rollouts = type("R", (), {"completion_mask": mask, "group_ids": groups})()
    return ShapedBatch(rollouts, rewards, None, rewards, mask, torch.zeros_like(mask), None)


def test_group_estimator_is_the_group_formula_and_owns_nothing():
    algo = Algorithm(scale="none")
    est = make_estimator(algo, group_size=2, hidden_size=8)
    got = est.estimate(_shaped(torch.tensor([1.0, 0.0, 1.0, 1.0]), [2, 3, 1, 4]), None)
    assert got.advantages.tolist() == [0.5, -0.5, 0.0, 0.0]  # hand-computed: r - group mean
    assert torch.equal(got.advantages, group_advantages(torch.tensor([1.0, 0, 1, 1]), 2, algo))
    assert est.head is None and est.param_groups(1e-3) == [] and est.trained_modules() == {}
    assert est.extra_loss(None, {}, torch.ones(1, 1)) == (None, {})
    assert est.state_dict() == {} and est.step_metrics() == {}


def test_gae_estimator_with_zero_head_and_gamma_lambda_one_returns_the_outcome():
    algo = Algorithm(advantage="gae", gae_lambda=1.0, whiten_advantages=False)
    est = make_estimator(algo, group_size=2, hidden_size=8)
    shaped = _shaped(torch.tensor([1.0, 0.0]), [2, 3])
    from ablate.base.records import HeadReadout

    got = est.estimate(shaped, HeadReadout(torch.zeros(2, 4), seconds=0.5))
    # V = 0, no KL: every real token's advantage is the outcome (hand-computed), 0 on padding
    assert got.advantages.tolist() == [[1, 1, 0, 0], [0, 0, 0, 0]]
    assert torch.equal(got.targets.returns, got.advantages)
    assert est.step_metrics()["perf/critic_seconds"] >= 0.5  # the V_old pass is charged
    assert est.step_metrics()["perf/critic_seconds"] == 0.0  # and reset per step
    state = est.state_dict()
    other = make_estimator(algo, group_size=2, hidden_size=8)
    with pytest.raises(ValueError, match="no value-head state"):
        other.load_state_dict({})
    other.load_state_dict(state)


class ProbeEstimator(GroupEstimator):
    """A new estimator in one class: group advantages plus a head with a loss of its own."""

    def __init__(self, algo, *, group_size, hidden_size, device):
        super().__init__(algo, group_size=group_size, hidden_size=hidden_size, device=device)
        self.head = value_head(hidden_size)
        nn.init.normal_(self.head.weight, std=0.1, generator=torch.Generator().manual_seed(0))
        self.losses = 0

    def param_groups(self, lr):
        return [{"params": list(self.head.parameters()), "lr": lr}]

    def extra_loss(self, outputs, targets, loss_mask):
        self.losses += 1
        loss = (outputs**2 * loss_mask).sum() / loss_mask.sum()
        return loss, {"probe/loss": float(loss.detach())}

    def trained_modules(self):
        return {"probe": self.head}

    def step_metrics(self):
        return {"probe/calls": float(self.losses)}

    def state_dict(self):
        return {"probe": self.head.state_dict()}


def test_a_new_estimator_trains_through_the_unchanged_trainer(monkeypatch):
    """Registered in place of "group", the probe is built by setup_trial, its head is trained by
    its loss and clipped, and its metrics are logged: the trainer needed no change."""
    made: list[ProbeEstimator] = []

    def factory(*args, **kwargs):
        made.append(ProbeEstimator(*args, **kwargs))
        return made[-1]

    monkeypatch.setitem(ESTIMATORS._table, "group", factory)
    spec = TrialSpec(
        algorithm=Algorithm(),
        model="tiny",
        task="arithmetic",
        task_options=(("n_train", 16), ("n_eval", 4)),
        template="plain",
        budget=Budget(max_steps=2, prompts_per_step=2, group_size=2, max_new_tokens=12),
        eval=EvalSpec(max_problems=2, n_samples=1, ks=(1,), at_start=False),
    )
    script = cycle_script([" 1+2=3; answer: 3", " 9"])
    tracker = MemoryTracker()
    result = train(
        spec,
        tracker=tracker,
        loaded=(tiny_llama(0, tokenizer=TOK), TOK),
        engine=lambda m, t: ScriptedEngine(script, tokenizer=t),
    )
    assert result.outcome == "finished" and len(made) == 1
    probe = made[0]
    assert probe.losses == 2 * spec.algorithm.ppo_epochs * spec.algorithm.minibatches
    assert [v for _, v in tracker.history("probe/calls")] == [1.0, 2.0]
    assert all(v > 0 for _, v in tracker.history("probe/grad_norm"))
    assert tracker.last("probe/loss") > 0
    hidden = probe.head.weight.shape[1]
    initial = ProbeEstimator(spec.algorithm, group_size=2, hidden_size=hidden, device="cpu")
    assert not torch.equal(probe.head.weight, initial.head.weight)  # its loss trained its head


def test_each_estimator_declares_the_fields_the_algorithm_checks_refuse_elsewhere():
    """The checks (floor 1) and the estimator registry (floor 3) read one declaration."""
    from ablate.factors.checks import estimator_reads

    registered = {name: ESTIMATORS.reads(name) for name in ESTIMATORS}
    assert registered == estimator_reads()
    assert "gae_lambda" in {r.field for r in registered["gae"]}
    assert "scale" in {r.field for r in registered["group"]}
