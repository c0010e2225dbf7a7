"""PPO with a learned critic and GAE — the reference row: Schulman et al. 2017, "Proximal Policy
Optimization Algorithms" (arXiv 1707.06347); GAE: Schulman et al. 2015, "High-Dimensional
Continuous Control Using Generalized Advantage Estimation" (arXiv 1506.02438). The LM-specific
values (per-token KL in the reward, value clipping, whitening, loss aggregation) are the defaults
of the reference implementation TRL `trl.experimental.ppo` (PPOConfig), which follows
InstructGPT / "Fine-Tuning Language Models from Human Preferences" (Ziegler et al. 2019).

The critic is a value head on the policy's hidden states (`ablate/factors/critic.py` says why)."""

from ablate.factors.algorithms import Algorithm

ALGORITHM = Algorithm(
    advantage="gae",  # PPO §5 Eq. 11-12: truncated GAE advantages from a learned V (GAE §3)
    gae_gamma=1.0,  # TRL gamma=1.0 (undiscounted: the outcome reward arrives on the last token)
    gae_lambda=0.95,  # PPO Table 3 (MuJoCo) lambda 0.95; TRL lam=0.95
    vf_coef=0.1,  # PPO Eq. 9's c1 (value-loss weight); TRL vf_coef=0.1
    vf_clip=0.2,  # TRL cliprange_value=0.2 (value clipping from OpenAI baselines' ppo2)
    whiten_advantages=True,  # TRL whitens advantages over the batch (masked_whiten)
    critic_lr=None,  # TRL trains policy and value with one optimizer: the same lr
    ratio_level="token",  # PPO §3 Eq. 7: per-step (here per-token) probability ratio
    clip_low=0.2,  # PPO §6.1: epsilon = 0.2 performs best; TRL cliprange=0.2
    clip_high=0.2,  # symmetric clip (PPO Eq. 7)
    dual_clip=None,  # not in PPO (dual clip is Ye et al. 2020)
    loss_agg="token_mean",  # TRL: policy and value losses are masked means over all tokens
    kl_coef=0.05,  # TRL kl_coef=0.05 (PPO §4's adaptive KL penalty is off: fixed coefficient)
    kl_estimator="k1",  # TRL kl_estimator="k1": log pi - log pi_ref per token
    kl_in="reward",  # TRL / Ziegler et al. 2019 §2: -beta·KL per token in the reward
    entropy_coef=0.0,  # TRL has no entropy bonus (PPO Eq. 9's c2 = 0)
    dynamic_sampling=False,  # not in PPO
    mask_truncated=False,  # TRL missing_eos_penalty=None: truncated completions are trained on
    overlong_buffer=0,  # no soft overlong punishment (DAPO's, not PPO's)
    ppo_epochs=4,  # TRL num_ppo_epochs=4 (PPO §6: K epochs over each batch)
    minibatches=1,  # TRL num_mini_batches=1
)
