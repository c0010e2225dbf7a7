"""Advantage estimators: the one interface between a shaped batch and the update loop.

An estimator owns everything its estimate needs: its parameters (a value head), its extra loss
term, its metrics and its checkpoint state. The trainer and `update.run_updates` call only the
`AdvantageEstimator` protocol, so a new estimator is one new class registered in `ESTIMATORS`
(with the `Algorithm` fields it reads) under the name `Algorithm.advantage` selects, and that
name in `algorithms.AdvantageName`: two files. The registry lives on the factors' floor, like the
surrogates', so `Algorithm`'s checks read the declarations from it; torch is imported at first
use (`ablate.base.lazy`), so declaring costs no torch import.

- `GroupEstimator` ("group", the GRPO family): a baseline and a scale over each group of G
  samples of one prompt (`advantages.group_advantages`); no parameters, no extra loss.
- `GAEEstimator` ("gae", PPO): a learned value head on the policy's last hidden state, GAE over
  the per-token rewards, the clipped value loss added to the policy loss (see `critic.py`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ablate.base.lazy import torch
from ablate.base.masked import masked_mean
from ablate.base.registry import AlgorithmFields, Registry
from ablate.factors.advantages import GROUP_READS, group_advantages
from ablate.factors.critic import (
    GAE_READS,
    explained_variance,
    gae,
    masked_whiten,
    num_params,
    token_rewards,
    value_loss,
)

if TYPE_CHECKING:
    from torch import Tensor, nn

    from ablate.base.records import Estimate, HeadReadout, ShapedBatch, ValueTargets


class AdvantageEstimator(Protocol):
    head: nn.Module | None
    """Reads the policy's last hidden states [B, T, H] into outputs [B, T] in the same forward as
    the log-probs; None: the estimator reads no hidden state (no forward returns any)."""

    def param_groups(self, lr: float) -> list[dict[str, Any]]:
        """Optimizer parameter groups of the estimator's own parameters (`lr`: the policy's)."""
        ...

    def estimate(self, batch: ShapedBatch, readout: HeadReadout | None) -> Estimate: ...

    def extra_loss(
        self, outputs: Tensor | None, targets: ValueTargets | None, loss_mask: Tensor
    ) -> tuple[Tensor | None, dict[str, float]]:
        """The term added to one minibatch's policy loss (None: nothing) and its statistics;
        `outputs`: the head's outputs [b, T] with gradient, `targets`: the `Estimate`'s targets
        of the minibatch's rows."""
        ...

    def trained_modules(self) -> dict[str, nn.Module]:
        """Modules the optimizer trains besides the policy, by metric prefix; each one's gradient
        is clipped on its own and its weights checked for NaN after the updates."""
        ...

    def step_metrics(self) -> dict[str, float]:
        """The estimator's cost in this step (seconds, parameters); resets the step's timer."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


def _records() -> Any:
    """`ablate.base.records`, imported at the first estimate (it imports torch)."""
    from ablate.base import records

    return records


def value_head(hidden_size: int) -> nn.Module:
    """V(s_t) = w·h_t + b on the policy's last hidden state h_t [B, T, H] -> [B, T], zero at
    the start."""
    return _value_head_class()(hidden_size)


@functools.cache
def _value_head_class() -> type:
    """The head's class, made at first use: it subclasses torch's `nn.Module`, and declaring the
    estimators must not import torch."""
    nn = torch.nn

    class ValueHead(nn.Module):
        def __init__(self, hidden_size: int) -> None:
            super().__init__()
            # zero init, not nn.Linear's: V = 0 at the start and no RNG draw, so a PPO arm sees
            # the same prompts and samples as the GRPO arms of its seed (critic.py: the design)
            self.weight = nn.Parameter(torch.zeros(1, hidden_size))
            self.bias = nn.Parameter(torch.zeros(1))

        def forward(self, hidden: Tensor) -> Tensor:
            return nn.functional.linear(hidden.float(), self.weight, self.bias).squeeze(-1)

    return ValueHead


EstimatorFactory = Callable[..., AdvantageEstimator]
ESTIMATORS: Registry[EstimatorFactory] = Registry("advantage estimator")


@ESTIMATORS.register("group", reads=GROUP_READS)
class GroupEstimator:
    """Group-relative advantages [B] of the shaped rewards (baseline and scale from `algo`)."""

    head = None

    def __init__(self, algo: AlgorithmFields, *, group_size: int, hidden_size: int, device: Any):
        self.algo, self.group_size = algo, group_size

    def param_groups(self, lr: float) -> list[dict[str, Any]]:
        return []

    def estimate(self, batch: ShapedBatch, readout: HeadReadout | None) -> Estimate:
        lengths = batch.rollouts.completion_mask.sum(-1)
        advantages = group_advantages(batch.rewards, self.group_size, self.algo, lengths=lengths)
        return _records().Estimate(advantages)

    def extra_loss(self, outputs, targets, loss_mask) -> tuple[Tensor | None, dict[str, float]]:
        return None, {}

    def trained_modules(self) -> dict[str, nn.Module]:
        return {}

    def step_metrics(self) -> dict[str, float]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        return None


@ESTIMATORS.register("gae", reads=GAE_READS)
class GAEEstimator:
    """Per-token advantages [B, T] by GAE from a learned value head (PPO). The head is trained
    by the clipped value loss, weighted `vf_coef`, in the policy's own updates; its parameters are
    an optimizer group at `critic_lr` (the policy's lr when None)."""

    def __init__(self, algo: AlgorithmFields, *, group_size: int, hidden_size: int, device: Any):
        self.algo = algo
        self.head = value_head(hidden_size).to(device)
        self._seconds = 0.0

    def param_groups(self, lr: float) -> list[dict[str, Any]]:
        # AdamW is per-parameter, so a group equals a separate AdamW at this lr, under the same
        # warm-up, and the optimizer's checkpoint covers it
        return [{"params": list(self.head.parameters()), "lr": self.algo.critic_lr or lr}]

    def estimate(self, batch: ShapedBatch, readout: HeadReadout | None) -> Estimate:
        if readout is None:
            raise ValueError("advantage='gae' needs the value head's outputs (V_old)")
        t0 = time.perf_counter()
        mask, algo = batch.rollouts.completion_mask, self.algo
        old_values = readout.outputs
        token_r = token_rewards(batch.outcome, mask, batch.kl_penalty)  # [B, T]
        advantages, returns = gae(token_r, old_values, mask, algo.gae_gamma, algo.gae_lambda)
        if algo.whiten_advantages:  # over the tokens that are trained on
            advantages = masked_whiten(advantages, batch.loss_mask)
        metrics = {
            "critic/explained_var": explained_variance(old_values, returns, mask),
            "critic/return_mean": masked_mean(returns, mask).item(),
        }
        self._seconds += readout.seconds + time.perf_counter() - t0
        # the rows' prompts travel with the targets: a prompt_mean value loss groups by them
        records = _records()
        targets = records.ValueTargets(old_values, returns, batch.rollouts.group_ids)
        return records.Estimate(advantages, metrics, targets)

    def extra_loss(self, outputs, targets, loss_mask) -> tuple[Tensor | None, dict[str, float]]:
        t0 = time.perf_counter()
        loss, stats = value_loss(
            outputs,
            targets.old_values,
            targets.returns,
            loss_mask,
            clip=self.algo.vf_clip,
            loss_agg=self.algo.loss_agg,
            norm_constant=self.algo.loss_norm_constant,
            group_ids=targets.group_ids,
        )
        self._seconds += time.perf_counter() - t0
        return self.algo.vf_coef * loss, stats

    def trained_modules(self) -> dict[str, nn.Module]:
        return {"critic": self.head}

    def step_metrics(self) -> dict[str, float]:
        seconds, self._seconds = self._seconds, 0.0
        return {
            "perf/critic_seconds": seconds,
            "budget/critic_params": float(num_params(self.head)),
        }

    def state_dict(self) -> dict[str, Any]:
        return {"value_head": self.head.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "value_head" not in state:
            raise ValueError("the checkpoint holds no value-head state (not a GAE trial)")
        self.head.load_state_dict(state["value_head"])


def make_estimator(
    algo: AlgorithmFields, *, group_size: int, hidden_size: int, device: Any = "cpu"
) -> AdvantageEstimator:
    """The estimator `algo.advantage` names, on `device`."""
    factory = ESTIMATORS.get(algo.advantage)
    return factory(algo, group_size=group_size, hidden_size=hidden_size, device=device)
