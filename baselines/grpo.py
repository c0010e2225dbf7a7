"""Vanilla GRPO — Shao et al. 2024, "DeepSeekMath" (arXiv 2402.03300)."""

from ablate.factors.algorithms import Algorithm

ALGORITHM = Algorithm(
    baseline="group_mean",  # DeepSeekMath §4.1.2 (outcome supervision): A = (r - mean r) / std r
    scale="group_std",  # DeepSeekMath §4.1.2, Eq. 3's advantage
    std_unbiased=True,  # the paper does not say; TRL, verl and oat all use N-1
    std_eps=1e-6,  # the paper does not say; verl's value
    ratio_level="token",  # DeepSeekMath Eq. 3: per-token ratio pi_theta / pi_old
    clip_low=0.2,  # DeepSeekMath Eq. 3 uses PPO's symmetric epsilon; 0.2 = PPO §6 (Schulman 2017)
    clip_high=0.2,  # symmetric clip (no clip-higher)
    dual_clip=None,  # not used in GRPO
    loss_agg="seq_mean_token_mean",  # DeepSeekMath Eq. 3: (1/G) sum_i (1/|o_i|) sum_t
    loss_norm_constant=None,  # only used by seq_mean_token_sum_norm
    kl_coef=0.04,  # DeepSeekMath §4.2: "the KL coefficient is 0.04"
    kl_estimator="k3",  # DeepSeekMath Eq. 4: unbiased estimator ratio - log ratio - 1
    kl_in="loss",  # DeepSeekMath §4.1.1: KL added to the loss, not the reward
    entropy_coef=0.0,  # no entropy bonus
    dynamic_sampling=False,  # every sampled group is trained on (DeepSeekMath §4.1.2)
    mask_truncated=False,  # no overlong filtering (introduced by DAPO §3.4)
    overlong_buffer=0,  # no soft overlong punishment (introduced by DAPO §3.4)
    ppo_epochs=1,  # DeepSeekMath §4.2: "the policy model only has a single update
    minibatches=1,  # following each exploration stage"
)
