"""PPO's learned critic: the fields it reads, per-token rewards, GAE, the clipped value loss. Its
value head is `estimators.value_head`, trained by the GAE estimator that owns it.

Design choice: the critic is a linear `ValueHead` on the policy's last hidden state (a shared
trunk, PPO's Eq. 9 with c1 = `vf_coef`), not a separate critic model as in verl or TRL.
- Cost: the critic adds hidden_size + 1 parameters and no forward pass during the updates (the
  values come from the same forward as the log-probs); only V_old costs one no-grad pass per
  step. A separate critic would double the model's memory, optimizer state and forward passes,
  which on a GPU rung is the difference between fitting and not.
- Price: the value loss's gradient shares the trunk with the policy; `vf_coef` sets that trade-off
  (TRL's 0.1 weights the value loss the same way in its joint loss).
- The head starts at zero (V = 0 everywhere) and draws no random numbers, so a PPO arm sees the
  same prompts and samples as the GRPO arms of its seed (common random numbers).

Position t's value is read where the policy predicts completion token t (the state before the
token), as TRL does. The functions below are pure; shapes are [B, T] over completion tokens with
`mask` 1 on real tokens.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ablate.base.lazy import no_grad, torch
from ablate.base.registry import FieldRule, finite
from ablate.factors.objective import AGGREGATIONS, masked_mean

if TYPE_CHECKING:
    from torch import Tensor, nn

#: Added to the variance before the square root when whitening (TRL's and verl's masked_whiten).
WHITEN_EPS = 1e-8


def _in_unit_interval(v, algo) -> bool:
    return finite(v) and 0 <= v <= 1


def _none_or_positive(v, algo) -> bool:
    return v is None or (finite(v) and v > 0)


#: The fields the GAE estimator (advantage="gae") reads, with the values it accepts; the other
#: estimators ignore them (so the checks refuse them there).
GAE_READS = (
    FieldRule("gae_gamma", _in_unit_interval, "must be a number in [0, 1]"),
    FieldRule("gae_lambda", _in_unit_interval, "must be a number in [0, 1]"),
    FieldRule(
        "vf_coef",
        lambda v, a: finite(v) and v > 0,
        "must be a number > 0 (0 would never train the critic)",
    ),
    FieldRule("vf_clip", _none_or_positive, "must be None (off) or a number > 0 (TRL uses 0.2)"),
    FieldRule("whiten_advantages", lambda v, a: isinstance(v, bool), "must be True or False"),
    FieldRule("critic_lr", _none_or_positive, "must be None (the policy's lr) or a number > 0"),
)


def num_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def token_rewards(outcome: Tensor, mask: Tensor, kl_penalty: Tensor | None = None) -> Tensor:
    """Per-token rewards [B, T]: the outcome reward [B] on each completion's last real token,
    minus the per-token KL penalty [B, T] (kl_in="reward"); 0 on padding."""
    mask = mask.to(outcome.dtype if outcome.is_floating_point() else torch.float32)
    lengths = mask.sum(-1).long()
    last = (lengths - 1).clamp(min=0).unsqueeze(-1)
    # a completion with no tokens has nowhere to put its reward: it gets none
    scores = (outcome.to(mask.dtype) * (lengths > 0)).unsqueeze(-1)
    rewards = torch.zeros_like(mask).scatter(-1, last, scores)
    if kl_penalty is not None:
        rewards = rewards - kl_penalty.to(mask.dtype) * mask
    return rewards * mask


def gae(
    rewards: Tensor, values: Tensor, mask: Tensor, gamma: float, lam: float
) -> tuple[Tensor, Tensor]:
    """Generalised advantage estimation (Schulman et al. 2015, Eq. 16) over completion tokens:
    delta_t = r_t + gamma·V_{t+1} - V_t, A_t = delta_t + gamma·lambda·A_{t+1}, returns R = A + V.

    The state after the last real token is terminal (V = 0). Masked positions are skipped: V and
    A are carried through them (verl's compute_gae_advantage_return), and both outputs are 0
    there."""
    mask = mask.to(values.dtype)
    next_value = torch.zeros_like(values[:, 0])
    next_adv = torch.zeros_like(values[:, 0])
    out = torch.zeros_like(values)
    for t in reversed(range(values.shape[1])):
        m = mask[:, t]
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        adv = delta + gamma * lam * next_adv
        next_value = m * values[:, t] + (1 - m) * next_value
        next_adv = m * adv + (1 - m) * next_adv
        out[:, t] = adv
    advantages = out * mask
    return advantages, (advantages + values) * mask


def masked_whiten(x: Tensor, mask: Tensor) -> Tensor:
    """(x - mean) / std over the masked entries (unbiased variance, as TRL, verl); 0 elsewhere."""
    mask = mask.to(x.dtype)
    count = mask.sum()
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask) * count / (count - 1).clamp(min=1)
    return (x - mean) * torch.rsqrt(var + WHITEN_EPS) * mask


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    *,
    clip: float | None,
    loss_agg: str = "token_mean",
    norm_constant: int | None = None,
    group_ids: Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO's clipped value loss 0.5·agg(max((V - R)², (clip(V, V_old ± clip) - R)²)), aggregated
    like the policy loss. Stats: the loss, the share of tokens where the clipped term is the larger
    one (the clip bound the gradient), and the mean predicted value."""
    mask = mask.to(values.dtype)
    unclipped = (values - returns) ** 2
    if clip is None:
        per_token, clipped_wins = unclipped, torch.zeros_like(unclipped, dtype=torch.bool)
    else:
        v_clipped = old_values + (values - old_values).clamp(-clip, clip)
        clipped = (v_clipped - returns) ** 2
        per_token = torch.maximum(unclipped, clipped)
        clipped_wins = clipped > unclipped
    loss = 0.5 * AGGREGATIONS.get(loss_agg)(per_token, mask, norm_constant, group_ids)
    with torch.no_grad():
        stats = {
            "critic/value_loss": float(loss),
            "critic/value_clip_frac": float(masked_mean(clipped_wins.to(mask.dtype), mask)),
            "critic/value_mean": float(masked_mean(values, mask)),
        }
    return loss, stats


@no_grad
def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """1 - Var[R - V] / Var[R] over the masked tokens: 1 = perfect, 0 = no better than the mean
    of R, < 0 = worse; NaN when the returns do not vary (nothing to explain)."""
    mask = mask.to(values.dtype)
    var_r = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
    err = returns - values
    var_err = masked_mean((err - masked_mean(err, mask)) ** 2, mask)
    if float(var_r) <= 0:
        return math.nan
    return float(1 - var_err / var_r)
