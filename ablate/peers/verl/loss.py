"""verl's expression of the estimator, critic, ratio, surrogate, clipping and loss-aggregation
fields of `Algorithm` (in field order)."""

from __future__ import annotations

from ablate.peers.model import SELF, Expr, Table, approx, cannot, exact, moot, one
from ablate.peers.verl.keys import (
    ALG,
    CRITIC,
    GROUP_NOTE,
    GSPO_NOTE,
    NEVER_BINDS,
    PER_MICRO_BATCH,
    PL,
    A,
)

LOSS: Table = {
    "advantage": {
        "group": one(exact(see="adv_estimator is set by baseline")),
        "gae": one(
            approx(
                {ALG + "adv_estimator": "gae"},
                f"{CRITIC}, not ablate's value head on the policy's trunk",
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
        "True": one(exact(note=f"{GROUP_NOTE} uses torch.std (N-1)")),
        "False": one(approx(None, f"{GROUP_NOTE}'s std is always N-1 (torch.std)")),
    },
    "std_eps": {
        "1e-6": one(exact(note=f"{GROUP_NOTE}'s hard-coded epsilon")),
        "1e-4": one(approx(None, f"{GROUP_NOTE} adds 1e-6 to the std (hard-coded)")),
        "other": one(approx(None, f"{GROUP_NOTE} adds 1e-6 to the std (hard-coded)")),
    },
    "gae_gamma": {"any": one(exact({ALG + "gamma": SELF}))},
    "gae_lambda": {"any": one(exact({ALG + "lam": SELF}))},
    "vf_coef": {"any": one(approx(None, f"{CRITIC}: no shared loss for vf_coef to weight"))},
    "vf_clip": {
        "None": one(
            exact({"critic.cliprange_value": NEVER_BINDS}, "verl always clips; this never binds")
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
            exact({PL + "loss_mode": "gspo"}, GSPO_NOTE, when={"advantage": "group"}),
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
        "clip_cov": one(approx({PL + "loss_mode": "clip_cov"}, PER_MICRO_BATCH)),
        "kl_cov": one(approx({PL + "loss_mode": "kl_cov"}, PER_MICRO_BATCH)),
    },
    "trust_region": {
        "ratio_clip": one(exact(see="loss_mode vanilla or gspo, set by ratio_level")),
        "dppo_tv": one(exact({PL + "loss_mode": "dppo_tv"}, "clip_ratio_low/high: TV bounds")),
        "dppo_kl": one(exact({PL + "loss_mode": "dppo_kl"}, "clip_ratio_low/high: KL bounds")),
    },
    "ratio_cap": {
        "None": one(exact({A + "clip_ratio_c": NEVER_BINDS}, "DPPO's ratio cap; never binds")),
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
                {A + "clip_ratio_c": NEVER_BINDS},
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
}
