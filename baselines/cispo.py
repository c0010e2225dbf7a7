"""CISPO — MiniMax et al. 2025, "MiniMax-M1: Scaling Test-Time Compute Efficiently with Lightning
Attention" (arXiv 2506.13585), §3.1 "Efficient RL Scaling with CISPO". Reference
implementations: TRL `loss_type="cispo"`, verl `policy_loss.loss_mode=cispo`.

M1 §3.1 builds CISPO on DAPO: it adopts "the group relative advantage from GRPO and the
token-level loss", and "we utilize the dynamic sampling and length penalty techniques from
Yu et al. (2025). There is no KL penalty term in CISPO". So this preset is `baselines/dapo.py`
with the CISPO objective (Eq. 4-5): -sg(clip(r, 1 - eps_low, 1 + eps_high)) · A · log π.

M1 gives no value for eps_high ("we only tuned eps_high"). The bound here is TRL's recommended
CISPO cap, 5.0 (TRL GRPOConfig `epsilon_high` help, citing ScaleRL, whose §A.17 finds eps_max in
{4, 5, 8} makes no significant difference). TRL and ScaleRL (Eq. 4: sg(min(ρ, ε_max))) cap the
ratio itself at eps_max; ablate, like verl and M1's Eq. 5, caps it at 1 + clip_high, so a cap
of 5 is clip_high=4.

Aggregation: M1 Eq. 4 normalises by the tokens of the prompt's G responses (1/Σ_i|o_i| inside
the expectation over prompts), the same form as DAPO's Eq. 12, which ScaleRL §A.2/§A.16 calls a
prompt average. M1 calls it "the token-level loss" of DAPO, and `baselines/dapo.py` reads DAPO's
form as token_mean, so this preset keeps token_mean; loss_agg="prompt_mean" is the literal
per-prompt reading.

Not modelled: the FP32 LM head (§3.2), AdamW β2 0.95 and eps 1e-15 (§3.2), early truncation by
repetition detection (§3.2)."""

import dataclasses

from ablate.baselines.dapo import ALGORITHM as DAPO

ALGORITHM = dataclasses.replace(
    DAPO,  # §3.1: GRPO advantages, DAPO's token-level loss, dynamic sampling and length
    # penalty, no KL; M1 §3.1 also runs 16 off-policy updates per generation batch, DAPO's 16
    surrogate="cispo",  # §3.1 Eq. 4-5: clip the IS weight (stop-gradient), not the update
    clip_low=1.0,  # §3.1: "we did not impose a lower bound on the IS weight": bound 1 - 1 = 0
    clip_high=4.0,  # IS weight capped at 5 = 1 + 4: TRL's recommended CISPO epsilon_high=5.0
)
