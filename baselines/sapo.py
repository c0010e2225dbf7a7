"""SAPO — Gao et al. 2025, "Soft Adaptive Policy Optimization" (arXiv 2511.20347), Qwen team.
Reference implementations: verl `policy_loss.loss_mode=sapo` (verl 0.9.1 `core_algos.py`
`compute_policy_loss_sapo`), TRL `loss_type="sapo"`.

SAPO replaces the hard clip by a soft gate on the token ratio, f(r) = σ(τ(r - 1))·4/τ, with
τ_pos for tokens whose advantage is positive and a larger τ_neg otherwise (negative updates are
damped faster). The advantages are GRPO's.

Read from the paper through a secondary summary (Eq. 5 objective, §5 settings), and checked
against verl 0.9.1, whose defaults are the values below: the objective averages tokens per
sequence and then over sequences, (1/G) Σ_i (1/|y_i|) Σ_t (verl forces `seq-mean-token-mean` for
SAPO whatever `loss_agg_mode` says): GRPO's aggregation, so it is inherited; it has no KL term."""

import dataclasses

from ablate.baselines.grpo import ALGORITHM as GRPO

ALGORITHM = dataclasses.replace(
    GRPO,  # GRPO's group-std advantages and per-sequence token mean (Eq. 5)
    surrogate="sapo",  # soft gate σ(τ(r - 1))·4/τ instead of the hard clip
    sapo_tau_pos=1.0,  # §5: τ_pos 1.0 (secondary); verl actor.yaml tau_pos: 1.0, TRL 1.0
    sapo_tau_neg=1.05,  # §5: τ_neg 1.05 > τ_pos (secondary); verl tau_neg: 1.05, TRL 1.05
    kl_coef=0.0,  # Eq. 5 has no KL term (secondary); verl's use_kl_loss defaults to false
    minibatches=4,  # §5 controlled runs: 4 mini-batches per rollout batch (secondary)
)
