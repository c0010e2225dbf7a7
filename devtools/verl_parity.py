"""Cross-check ablate's losses and advantages against verl's own implementation, on identical
random tensors: values and gradients, every surrogate and DPPO trust region × every aggregation
both support, and every rollout correction verl has (`verl_rollout_parity`).

Not part of the test suite (verl pulls ray, vLLM and more). Run it against the verl wheel
unpacked next to a few light dependencies; modules core_algos never calls (ray, …) are stubbed:

    pip download verl==0.9.1 --no-deps -d /tmp/verlpkg
    unzip -q /tmp/verlpkg/verl-0.9.1-py3-none-any.whl -d /tmp/verlpkg/verl_src
    pip install --target /tmp/verldeps --no-deps omegaconf antlr4-python3-runtime orjson
    PYTHONPATH=/tmp/verlpkg/verl_src:/tmp/verldeps .venv/bin/python -m devtools verl-parity

Prints one line per comparison and exits 1 if any differs by more than 1e-6.
"""

from __future__ import annotations

import argparse
import types

import numpy as np
import torch

from devtools.verl_common import AGGS, compare, import_verl, verl_config
from devtools.verl_rollout_parity import check_corrections

SURROGATES = {  # ablate surrogate -> (verl loss_mode, ablate fields, verl policy_loss fields)
    "clip": ("vanilla", {"clip_high": 0.28}, {}),
    "cispo": ("cispo", {"clip_low": 1.0, "clip_high": 4.0}, {}),
    "sapo": ("sapo", {"sapo_tau_pos": 1.0, "sapo_tau_neg": 1.05}, {}),
    "gmpo": ("geo_mean", {"clip_low": 0.4, "clip_high": 0.4}, {}),
    "clip_cov": (
        "clip_cov",
        {"cov_fraction": 0.05, "cov_clip_low": 0.01, "cov_clip_high": 5.0},
        {"clip_cov_ratio": 0.05, "clip_cov_lb": 0.01, "clip_cov_ub": 5.0},
    ),
    "kl_cov": (
        "kl_cov",
        {"cov_fraction": 0.05, "kl_cov_coef": 1.0},
        {"kl_cov_ratio": 0.05, "ppo_kl_coef": 1.0},
    ),
}
TRUST_REGIONS = {  # ablate trust_region -> (verl loss_mode, ablate fields); cap 2 binds often
    "dppo_tv": ("dppo_tv", {"clip_low": 0.15, "clip_high": 0.1, "ratio_cap": 2.0}),
    "dppo_kl": ("dppo_kl", {"clip_low": 0.05, "clip_high": 0.03, "ratio_cap": 2.0}),
}
# verl applies its own aggregation to these two: SAPO always seq-mean-token-mean, GMPO a mean
# over sequences (its loss_agg_mode is ignored)
FIXED_AGG = {"sapo": "seq_mean_token_mean", "gmpo": "seq_mean_token_mean"}


def _batch(seed: int, b: int = 8, t: int = 12):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 3
    logp = old + 0.4 * torch.randn(b, t, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = (torch.arange(t) < lengths.unsqueeze(-1)).double()
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    return logp, old, mask, adv


def check_losses(verl, actor, seed: int) -> bool:
    from ablate.factors.algorithms import Algorithm
    from ablate.factors.objective import policy_loss

    ok = True
    for surrogate, (mode, fields, verl_fields) in SURROGATES.items():
        aggs = [FIXED_AGG[surrogate]] if surrogate in FIXED_AGG else list(AGGS)
        for agg in aggs:
            logp, old, mask, adv = _batch(seed)
            t = mask.shape[1]
            norm = t if agg == "seq_mean_token_sum_norm" else None
            algo = Algorithm(surrogate=surrogate, loss_agg=agg, loss_norm_constant=norm, **fields)
            cfg = verl_config(actor, mode, verl_fields, algo)
            ours_x = logp.clone().requires_grad_(True)
            torch.manual_seed(seed)  # Clip-Cov's random pick: the same draw for both
            ours, stats = policy_loss(
                ours_x, old, adv, mask, algo, group_ids=torch.arange(len(adv))
            )
            ours.backward()
            if "cov_selected_frac" in stats:  # the comparison must exercise the selection
                assert stats["cov_selected_frac"] > 0, (surrogate, agg, seed)
            theirs_x = logp.clone().requires_grad_(True)
            torch.manual_seed(seed)
            adv_tok = adv.unsqueeze(-1) * mask
            theirs, _ = verl.get_policy_loss_fn(mode)(old, theirs_x, adv_tok, mask, AGGS[agg], cfg)
            theirs.backward()
            label = f"seed {seed} {surrogate} × {agg}"
            ok &= compare(label + " value", ours.detach(), theirs.detach())
            ok &= compare(label + " grad", ours_x.grad, theirs_x.grad)
    return ok


def check_trust_regions(verl, actor, seed: int) -> bool:
    """DPPO's TV and KL masks (trust_region) against verl's dppo_tv / dppo_kl losses, every
    aggregation; the batch must exercise both the mask and the ratio cap."""
    from ablate.factors.algorithms import Algorithm
    from ablate.factors.objective import policy_loss

    ok = True
    for region, (mode, fields) in TRUST_REGIONS.items():
        for agg in AGGS:
            logp, old, mask, adv = _batch(seed)
            logp = logp.clamp(max=-1e-3)  # probabilities below 1: the binary KL takes log(1 - π)
            norm = mask.shape[1] if agg == "seq_mean_token_sum_norm" else None
            algo = Algorithm(trust_region=region, loss_agg=agg, loss_norm_constant=norm, **fields)
            cfg = verl_config(actor, mode, {}, algo, clip_ratio_c=algo.ratio_cap)
            ours_x = logp.clone().requires_grad_(True)
            ours, stats = policy_loss(ours_x, old, adv, mask, algo)
            ours.backward()
            assert stats["trust_region_masked_frac"] > 0, (region, agg, seed)
            assert stats["ratio_capped_frac"] > 0, (region, agg, seed)
            theirs_x = logp.clone().requires_grad_(True)
            adv_tok = adv.unsqueeze(-1) * mask
            theirs, _ = verl.get_policy_loss_fn(mode)(old, theirs_x, adv_tok, mask, AGGS[agg], cfg)
            theirs.backward()
            label = f"seed {seed} trust_region {region} × {agg}"
            ok &= compare(label + " value", ours.detach(), theirs.detach())
            ok &= compare(label + " grad", ours_x.grad, theirs_x.grad)
    return ok


def check_advantages(verl, seed: int) -> bool:
    from ablate.factors.advantages import group_advantages
    from ablate.factors.algorithms import Algorithm

    g = torch.Generator().manual_seed(seed)
    n, size, t = 6, 4, 10
    scores = torch.randint(0, 2, (n * size,), generator=g).double()
    scores[:size] = 1.0  # one flat group
    lengths = torch.randint(1, t + 1, (n * size,), generator=g)
    mask = (torch.arange(t) < lengths.unsqueeze(-1)).double()
    token_rewards = torch.zeros(n * size, t, dtype=torch.float64)
    token_rewards[torch.arange(n * size), lengths - 1] = scores
    index = np.repeat(np.arange(n), size)
    cases = {
        "grpo": ({}, verl.compute_grpo_outcome_advantage, {"index": index}),
        "rloo": (
            {"baseline": "leave_one_out", "scale": "none"},
            verl.compute_rloo_outcome_advantage,
            {"index": index},
        ),
        "reinforce_plus_plus_baseline": (
            {"scale": "token_whiten"},
            verl.compute_reinforce_plus_plus_baseline_outcome_advantage,
            {"index": index},
        ),
        "reinforce_plus_plus": (
            {"baseline": "none", "scale": "token_whiten"},
            verl.compute_reinforce_plus_plus_outcome_advantage,
            {"config": types.SimpleNamespace(gamma=1.0)},
        ),
    }
    ok = True
    for name, (fields, fn, extra) in cases.items():
        ours = group_advantages(scores, size, Algorithm(**fields), lengths=mask.sum(-1))
        theirs, _ = fn(token_rewards.clone(), mask, **extra)
        ok &= compare(f"seed {seed} advantages {name}", ours.unsqueeze(-1) * mask, theirs)
    return ok


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m devtools verl-parity",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    ).parse_args(argv)
    verl, actor = import_verl()
    results = [
        check_losses(verl, actor, s)
        & check_trust_regions(verl, actor, s)
        & check_advantages(verl, s)
        & check_corrections(verl, actor, s)
        for s in (0, 1, 2)
    ]
    return 0 if all(results) else 1
