"""How verl 0.9.1 expresses each value of each `Algorithm` field, as Hydra overrides of
`verl.trainer.main_ppo` (data; the vocabulary is in `model.py`). Every claim was checked against
verl/trainer/ppo/core_algos.py (advantage estimators, policy losses, agg_loss, kl_penalty),
ray_trainer.py (compute_advantage, apply_kl_penalty), workers/utils/losses.py (ppo_loss),
trainer/ppo/rollout_corr_helper.py, trainer/ppo/v1 (filter_groups), the dapo reward manager and
the dataclasses/YAML under trainer/config and workers/config.

`algorithm.adv_estimator` fuses our baseline and scale: grpo = group mean (÷ group std unless
norm_adv_by_std_in_grpo=False), rloo = leave-one-out without a std, reinforce_plus_plus_baseline
= group mean then token whitening, reinforce_plus_plus = no baseline then token whitening. It is
keyed under `baseline`, per scale.
"""

from __future__ import annotations

from ablate.peers.model import SELF, Expr, PeerBudget, Table, approx, cannot, exact, moot, one

NAME = "verl"
VERSION = "0.9.1"

A = "actor_rollout_ref.actor."
PL = A + "policy_loss."
ALG = "algorithm."
RC = ALG + "rollout_correction."
OB = "+reward.reward_kwargs.overlong_buffer_cfg."

_CRITIC = "verl's critic is a separate model with its own optimizer (critic.*)"
_NEVER_BINDS = 1e9  # above verl's largest ratio e^20 (its log-ratio clamp): a clip that never binds
_RS_FLOOR = "1e-10"  # below verl's smallest IS weight e^-20: an IcePop floor that never masks


def _mini_batch(a, b: PeerBudget) -> int:
    from ablate.base.errors import ConfigError

    if b.prompts % a.minibatches:
        raise ConfigError(
            f"verl's mini-batch is whole prompts: {b.prompts} prompts per step do not split into "
            f"{a.minibatches} mini-batches; pass --prompts as a multiple of {a.minibatches}"
        )
    return b.prompts // a.minibatches


def _k_note(k: str) -> str:
    if k == "k3":
        return "verl clamps k3 at 10 per token (ablate does not)"
    return ""


def _correction(level: str):
    return exact(
        {
            RC + "rollout_is": level,
            RC + "rollout_rs": None,
            "actor_rollout_ref.rollout.calculate_log_probs": True,
        },
        "decoupled mode: weights π_old/π_rollout on the policy loss",
    )


_GROUP_NOTE = "verl's grpo estimator"
_PER_MICRO_BATCH = (
    "verl takes the covariance and picks cov_fraction of the tokens per micro-batch on each GPU; "
    "ablate over the whole minibatch (the same with one micro-batch per mini-batch)"
)
_GSPO_NOTE = (
    "verl's gspo is GSPO-token (sg[s_i]·π/sg[π]), equal to the sequence ratio in value and "
    "gradient when the advantage is constant over a sequence; its log-ratio is capped at 10"
)

TABLE: Table = {
    "advantage": {
        "group": one(exact(see="adv_estimator is set by baseline")),
        "gae": one(
            approx(
                {ALG + "adv_estimator": "gae"},
                f"{_CRITIC}, not ablate's value head on the policy's trunk",
            )
        ),
    },
    "baseline": {
        "group_mean": one(
            exact({ALG + "adv_estimator": "grpo"}, when={"scale": ("group_std", "none")}),
            exact(
                {ALG + "adv_estimator": "reinforce_plus_plus_baseline"},
                when={"scale": "token_whiten"},
            ),
            moot("the scale is not in verl"),
        ),
        "leave_one_out": one(
            exact({ALG + "adv_estimator": "rloo"}, when={"scale": "none"}),
            cannot("verl's rloo does not divide by a std (scale='none' only)"),
        ),
        "none": one(
            approx(
                {ALG + "adv_estimator": "reinforce_plus_plus", ALG + "gamma": 1.0},
                "verl's returns are the reward-to-go of the per-token KL penalties; ablate "
                "subtracts each completion's whole KL sum on every token",
                when={"scale": "token_whiten", "kl_in": "reward", "kl_coef": "above 0"},
            ),
            exact(
                {ALG + "adv_estimator": "reinforce_plus_plus", ALG + "gamma": 1.0},
                "returns with gamma 1 put the outcome reward on every token, then whitened",
                when={"scale": "token_whiten"},
            ),
            cannot(
                "verl's only estimator without a baseline whitens tokens (scale='token_whiten')"
            ),
        ),
    },
    "scale": {
        "group_std": one(
            exact({ALG + "norm_adv_by_std_in_grpo": True}, when={"baseline": "group_mean"}),
            moot("see baseline"),
        ),
        "batch_std": one(cannot("verl's grpo divides by the group std only")),
        "mean": one(cannot("verl 0.9.1 has no MaxRL estimator (÷ the group mean)")),
        "batch_centred_std": one(cannot("no verl estimator divides by a batch std")),
        "token_whiten": one(
            exact(
                note="verl's masked_whiten: (x - token mean)·rsqrt(token var + 1e-8)",
                when={"baseline": ("group_mean", "none")},
            ),
            moot("see baseline"),
        ),
        "none": one(
            exact({ALG + "norm_adv_by_std_in_grpo": False}, when={"baseline": "group_mean"}),
            exact(when={"baseline": "leave_one_out"}),
            moot("see baseline"),
        ),
    },
    "positive_weight": {
        "1": one(exact()),
        "other": one(cannot("verl 0.9.1 has no advantage-sign weighting")),
    },
    "std_unbiased": {
        "True": one(exact(note=f"{_GROUP_NOTE} uses torch.std (N-1)")),
        "False": one(approx(None, f"{_GROUP_NOTE}'s std is always N-1 (torch.std)")),
    },
    "std_eps": {
        "1e-6": one(exact(note=f"{_GROUP_NOTE}'s hard-coded epsilon")),
        "1e-4": one(approx(None, f"{_GROUP_NOTE} adds 1e-6 to the std (hard-coded)")),
        "other": one(approx(None, f"{_GROUP_NOTE} adds 1e-6 to the std (hard-coded)")),
    },
    "gae_gamma": {"any": one(exact({ALG + "gamma": SELF}))},
    "gae_lambda": {"any": one(exact({ALG + "lam": SELF}))},
    "vf_coef": {"any": one(approx(None, f"{_CRITIC}: no shared loss for vf_coef to weight"))},
    "vf_clip": {
        "None": one(
            exact({"critic.cliprange_value": _NEVER_BINDS}, "verl always clips; this never binds")
        ),
        "a number": one(exact({"critic.cliprange_value": SELF})),
    },
    "whiten_advantages": {
        "True": one(exact(note="verl always whitens GAE advantages (masked_whiten)")),
        "False": one(cannot("verl always whitens GAE advantages")),
    },
    "critic_lr": {
        "None": one(exact({"critic.optim.lr": "${actor_rollout_ref.actor.optim.lr}"})),
        "a number": one(exact({"critic.optim.lr": SELF})),
    },
    "ratio_level": {
        "token": one(
            exact(
                {PL + "loss_mode": "vanilla"},
                when={"surrogate": "clip", "trust_region": "ratio_clip"},
            ),
            exact(see="loss_mode is set by surrogate or trust_region"),
        ),
        "sequence": one(
            exact({PL + "loss_mode": "gspo"}, _GSPO_NOTE, when={"advantage": "group"}),
            approx(
                {PL + "loss_mode": "gspo"},
                "verl's gspo is GSPO-token: with per-token GAE "
                "advantages its gradient differs from the sequence ratio's",
            ),
        ),
        "sequence_token": one(exact({PL + "loss_mode": "gspo"}, "log-ratio capped at 10")),
    },
    "surrogate": {
        "clip": one(exact(see="loss_mode vanilla or gspo, set by ratio_level")),
        "cispo": one(exact({PL + "loss_mode": "cispo"})),
        "sapo": one(
            exact({PL + "loss_mode": "sapo"}, when={"loss_agg": "seq_mean_token_mean"}),
            cannot("verl's sapo always aggregates seq-mean-token-mean"),
        ),
        "gmpo": one(
            approx(
                {PL + "loss_mode": "geo_mean"},
                "verl's geo_mean is a plain mean per micro-batch (it skips global_batch_info): "
                "with k micro-batches per mini-batch on a GPU the gradient is k times ablate's",
                when={"loss_agg": "seq_mean_token_mean"},
            ),
            cannot("verl's geo_mean is always a mean over sequences (seq_mean_token_mean)"),
        ),
        "clip_cov": one(approx({PL + "loss_mode": "clip_cov"}, _PER_MICRO_BATCH)),
        "kl_cov": one(approx({PL + "loss_mode": "kl_cov"}, _PER_MICRO_BATCH)),
    },
    "trust_region": {
        "ratio_clip": one(exact(see="loss_mode vanilla or gspo, set by ratio_level")),
        "dppo_tv": one(exact({PL + "loss_mode": "dppo_tv"}, "clip_ratio_low/high: TV bounds")),
        "dppo_kl": one(exact({PL + "loss_mode": "dppo_kl"}, "clip_ratio_low/high: KL bounds")),
    },
    "ratio_cap": {
        "None": one(exact({A + "clip_ratio_c": _NEVER_BINDS}, "DPPO's ratio cap; never binds")),
        "a number": one(exact({A + "clip_ratio_c": SELF}, "DPPO's truncated-IS cap")),
    },
    "clip_low": {
        "below 1": one(exact({A + "clip_ratio_low": SELF})),
        "1 (no lower bound)": one(exact({A + "clip_ratio_low": SELF})),
    },
    "clip_high": {"any": one(exact({A + "clip_ratio_high": SELF}))},
    "dual_clip": {
        "None": one(
            exact(
                {A + "clip_ratio_c": _NEVER_BINDS},
                "verl's vanilla loss always dual-clips (default 3.0); this never binds",
                when={"ratio_level": "token"},
            ),
            exact(note="verl's gspo has no dual clip"),
        ),
        "above 1 + clip_high": one(
            exact({A + "clip_ratio_c": SELF}, when={"ratio_level": "token"}),
            cannot("verl's gspo loss has no dual clip"),
        ),
        "up to 1 + clip_high": one(
            exact({A + "clip_ratio_c": SELF}, when={"ratio_level": "token"}),
            cannot("verl's gspo loss has no dual clip"),
        ),
    },
    "sapo_tau_pos": {"any": one(exact({A + "tau_pos": SELF}))},
    "sapo_tau_neg": {"any": one(exact({A + "tau_neg": SELF}))},
    "cov_fraction": {
        "any": one(
            exact({PL + "clip_cov_ratio": SELF}, when={"surrogate": "clip_cov"}),
            exact({PL + "kl_cov_ratio": SELF}),
        )
    },
    "cov_clip_low": {"any": one(exact({PL + "clip_cov_lb": SELF}))},
    "cov_clip_high": {"any": one(exact({PL + "clip_cov_ub": SELF}))},
    "kl_cov_coef": {"any": one(exact({PL + "ppo_kl_coef": SELF}, "verl's default is 0.1"))},
    "loss_agg": {
        "token_mean": one(exact({A + "loss_agg_mode": "token-mean"})),
        "seq_mean_token_mean": one(exact({A + "loss_agg_mode": "seq-mean-token-mean"})),
        "seq_mean_token_sum": one(exact({A + "loss_agg_mode": "seq-mean-token-sum"})),
        "seq_mean_token_sum_norm": one(exact({A + "loss_agg_mode": "seq-mean-token-sum-norm"})),
        "prompt_mean": one(cannot("verl aggregates over tokens or sequences, never per prompt")),
        "token_sum": one(exact({A + "loss_agg_mode": "token-sum"})),
    },
    "loss_norm_constant": {
        "None (max new tokens)": one(
            exact(
                {A + "loss_scale_factor": Expr("max new tokens", lambda a, b: b.max_new_tokens)},
                "unset, verl divides by the padded response length of each micro-batch",
            )
        ),
        "an integer": one(exact({A + "loss_scale_factor": SELF})),
    },
    "kl_coef": {
        "0": one(exact({A + "use_kl_loss": False, ALG + "use_kl_in_reward": False})),
        "above 0": one(
            exact(
                {
                    A + "use_kl_loss": True,
                    A + "kl_loss_coef": SELF,
                    ALG + "use_kl_in_reward": False,
                },
                when={"kl_in": "loss"},
            ),
            exact(
                {
                    A + "use_kl_loss": False,
                    ALG + "use_kl_in_reward": True,
                    ALG + "kl_ctrl.type": "fixed",
                    ALG + "kl_ctrl.kl_coef": SELF,
                },
                "kl_coef · Σ_t KL(π_old‖π_ref) subtracted from the reward (apply_kl_penalty)",
            ),
        ),
    },
    "kl_estimator": {
        k: one(
            exact({A + "kl_loss_type": k}, _k_note(k), when={"kl_in": "loss"}),
            exact({ALG + "kl_penalty": k}, _k_note(k)),
        )
        for k in ("k1", "k2", "k3")
    },
    "kl_in": {
        "loss": one(exact(see="set by kl_coef")),
        "reward": one(exact(see="set by kl_coef")),
    },
    "entropy_coef": {
        "0": one(exact({A + "entropy_coeff": 0.0})),
        "above 0": one(exact({A + "entropy_coeff": SELF}, "aggregated with loss_agg_mode")),
    },
    "dynamic_sampling": {
        "False": one(exact({ALG + "filter_groups.enable": False})),
        "True": one(
            exact(
                {ALG + "filter_groups.enable": True, ALG + "filter_groups.metric": "acc"},
                "acc: the verifier's score before the overlong penalty, which ablate filters on "
                "(the naive and dapo reward managers record a scalar score as acc)",
            )
        ),
    },
    "max_gen_batches": {
        "any": one(
            approx(
                None,
                "verl's V1 replay buffer refills without a cap (it ignores "
                "filter_groups.max_num_gen_batches); ablate fails the step after max_gen_batches",
            )
        )
    },
    "mask_truncated": {
        "False": one(exact()),
        "True": one(cannot("verl 0.9.1 has no overlong filtering of truncated completions")),
    },
    "overlong_buffer": {
        "0 (off)": one(exact()),
        "tokens or a share": one(
            exact(
                {
                    "reward.reward_manager.name": "dapo",
                    OB + "enable": True,
                    OB + "len": SELF,
                    OB + "log": False,
                    "+reward.reward_kwargs.max_resp_len": Expr(
                        "max new tokens", lambda a, b: b.max_new_tokens
                    ),
                },
                "the dapo reward manager adds DAPO Eq. 13's length penalty to the score",
            )
        ),
    },
    "overlong_penalty": {"any": one(exact({OB + "penalty_factor": SELF}))},
    "zero_variance_filter": {
        "False": one(exact()),
        "True": one(cannot("verl's filter_groups always refills the batch (dynamic_sampling)")),
    },
    "retire_pass_rate": {
        "None": one(exact()),
        "a number": one(cannot("verl 0.9.1 has no pass-rate-based prompt retirement")),
    },
    "reward_control": {
        "none": one(exact()),
        **{
            c: one(cannot(f"no config key: a reward function that pays the {c} control"))
            for c in ("random", "incorrect", "majority_vote", "format_only")
        },
    },
    "reward_control_p": {"any": one(cannot("no config key: the reward function's probability"))},
    "reward_floor": {
        "0": one(exact()),
        "other": one(cannot("no config key: the reward function's score for a wrong answer")),
    },
    "rollout_correction": {
        "none": one(exact({RC + "rollout_is": None, RC + "rollout_rs": None})),
        "token_truncate": one(_correction("token")),
        "sequence_mask": one(_correction("sequence")),
    },
    "rollout_correction_cap": {
        "any": one(
            exact(
                {RC + "rollout_is_threshold": SELF}, when={"rollout_correction": "token_truncate"}
            ),
            exact(
                {
                    RC + "rollout_is_threshold": Expr(
                        f"{_RS_FLOOR}_<cap>", lambda a, b: f"{_RS_FLOOR}_{a.rollout_correction_cap}"
                    )
                },
                "IcePop bounds: weights above the cap are zeroed; the floor never masks",
            ),
        )
    },
    "ppo_epochs": {"any": one(exact({A + "ppo_epochs": SELF}))},
    "minibatches": {
        "1": one(exact({A + "ppo_mini_batch_size": Expr("prompts / minibatches", _mini_batch)})),
        "above 1": one(
            exact({A + "ppo_mini_batch_size": Expr("prompts / minibatches", _mini_batch)})
        ),
    },
}
