"""The rollout corrections against verl 0.9.1's `rollout_corr_helper` (decoupled mode), part of
`python -m devtools verl-parity`: on identical random tensors, the weights or rejection masks,
then the PPO-clip loss with them applied (value and gradient) under every aggregation both
support. OPSM and M2PO have no verl counterpart (TRL's and AReaL's) and are not compared here.

Parameterisation differences, mapped below: verl's geo_rs (`seq_mean_k1`) bounds exp(mean
−log ρ), so ablate's band [floor, cap] on exp(mean log ρ) is verl's "1/cap_1/floor"; ablate's
sequence_mask (TRL's) is verl's sequence IS with an IcePop floor that never binds.
"""

from __future__ import annotations

import importlib

import torch

from devtools.verl_common import AGGS, compare, verl_config

#: ablate correction -> (its fields, verl's compute_rollout_correction_and_rejection_mask args)
CASES = {
    "token_truncate": (
        {"rollout_correction_cap": 1.5},
        {"rollout_is": "token", "rollout_is_threshold": 1.5},
    ),
    "token_mis": (
        {"rollout_correction_cap": 1.5, "rollout_correction_floor": 0.8},
        {"rollout_is": "token", "rollout_is_threshold": "0.8_1.5"},
    ),
    "sequence_mask": (
        {"rollout_correction_cap": 2.0},
        {"rollout_is": "sequence", "rollout_is_threshold": "1e-10_2.0"},
    ),
    "geo_rs": (
        {"rollout_correction_cap": 1.1, "rollout_correction_floor": 0.9},
        {"rollout_rs": "seq_mean_k1", "rollout_rs_threshold": f"{1 / 1.1}_{1 / 0.9}"},
    ),
    "k3_rs": (
        {"rejection_k3_max": 0.05},
        {"rollout_rs": "seq_mean_k3", "rollout_rs_threshold": 0.05},
    ),
}


def _batch(seed: int, b: int = 12, t: int = 10):
    """Trainer, engine and current log-probs [b, t], mask, advantages [b]: the engine differs
    from the trainer by 0.3 per token (bf16-sized and more), so every correction binds."""
    g = torch.Generator().manual_seed(1000 + seed)
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 3
    engine = old + 0.3 * torch.randn(b, t, generator=g, dtype=torch.float64)
    logp = old + 0.2 * torch.randn(b, t, generator=g, dtype=torch.float64)
    lengths = torch.randint(2, t + 1, (b,), generator=g)
    mask = (torch.arange(t) < lengths.unsqueeze(-1)).double()
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    return old, engine, logp, mask, adv


def _ours(name: str, fields: dict, old, engine, mask, adv):
    from ablate.factors.algorithms import Algorithm
    from ablate.factors.rollout_corrections import ROLLOUT_CORRECTIONS

    algo = Algorithm(rollout_correction=name, **fields)
    c = ROLLOUT_CORRECTIONS.get(name)(old, engine, mask, adv, algo)
    keep = mask if c.keep is None else mask * c.keep
    return c.weights, keep


def _theirs(helper, args: dict, old, engine, mask):
    weights, keep = None, mask
    log_ratio = old - engine
    if "rollout_is" in args:
        threshold = args["rollout_is_threshold"]
        weights, _ = helper.compute_rollout_correction_weights(
            log_ratio, mask, rollout_is=args["rollout_is"], rollout_is_threshold=threshold
        )
    if "rollout_rs" in args:
        keep, _ = helper.compute_rollout_rejection_mask(
            log_ratio,
            mask,
            rollout_rs=args["rollout_rs"],
            rollout_rs_threshold=args["rollout_rs_threshold"],
        )
    return weights, keep


def check_corrections(verl, actor, seed: int) -> bool:
    """Each correction's weights / mask, then the loss with it, against verl's."""
    from ablate.factors.algorithms import Algorithm
    from ablate.factors.objective import policy_loss

    helper = importlib.import_module("verl.trainer.ppo.rollout_corr_helper")
    ok = True
    for name, (fields, args) in CASES.items():
        old, engine, logp, mask, adv = _batch(seed)
        w_ours, keep_ours = _ours(name, fields, old, engine, mask, adv)
        w_theirs, keep_theirs = _theirs(helper, args, old, engine, mask)
        bound = (w_ours == 0) | (keep_ours == 0) if name != "token_truncate" else w_ours == 1.5
        assert bool((bound & (mask > 0)).any()) and bool((~bound & (mask > 0)).any()), name
        label = f"seed {seed} rollout_correction {name}"
        if w_ours is not None:
            ok &= compare(label + " weights", w_ours, w_theirs)
        ok &= compare(label + " loss mask", keep_ours, keep_theirs)
        for agg in AGGS:
            norm = mask.shape[1] if agg == "seq_mean_token_sum_norm" else None
            algo = Algorithm(loss_agg=agg, loss_norm_constant=norm, clip_high=0.28)
            cfg = verl_config(actor, "vanilla", {}, algo)
            ours_x = logp.clone().requires_grad_(True)
            ours, _ = policy_loss(ours_x, old, adv, keep_ours, algo, is_weights=w_ours)
            ours.backward()
            theirs_x = logp.clone().requires_grad_(True)
            adv_tok = adv.unsqueeze(-1) * mask
            theirs, _ = verl.get_policy_loss_fn("vanilla")(
                old, theirs_x, adv_tok, keep_theirs, AGGS[agg], cfg, rollout_is_weights=w_theirs
            )
            theirs.backward()
            ok &= compare(f"{label} × {agg} value", ours.detach(), theirs.detach())
            ok &= compare(f"{label} × {agg} grad", ours_x.grad, theirs_x.grad)
    return ok
