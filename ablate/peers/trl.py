"""How TRL 1.16's `GRPOConfig` expresses each value of each `Algorithm` field (data; the
vocabulary is in `model.py`). Every claim was checked against trl/trainer/grpo_config.py and
grpo_trainer.py (`_generate_and_score_completions`, `_compute_loss`) and trl/rewards.

`loss_type` fuses two of our fields: the surrogate and the aggregation. Its clip-family values
are the PPO clip with grpo = per-sequence token mean, dapo = token mean over the generation batch,
dr_grpo = token sum / (sequences × max_completion_length), luspo = per-sequence token sum; cispo
is a token mean, sapo a per-sequence token mean. So loss_type is keyed under `loss_agg`, per
surrogate.
"""

from __future__ import annotations

from ablate.factors.rollout_corrections import lower_bound
from ablate.peers.model import SELF, Expr, Table, approx, cannot, exact, moot, one

NAME = "TRL"
VERSION = "1.16.0"

_NO_CRITIC = "GRPOTrainer has no critic (TRL's PPO is trl.experimental.ppo, another trainer)"
_SURROGATE_NOT_IN_TRL = "surrogate is not in TRL"
_SEQ_MASK = (
    "TRL's per-sequence loss types still count fully masked completions in the number of "
    "sequences (ablate counts only sequences with a token)"
)
_MINIBATCH_NORM = (
    "with several minibatches TRL divides each minibatch's token sum by the generation batch's "
    "tokens / steps_per_generation, not by that minibatch's own token count"
)


def _clip_family(loss_type: str, note: str = ""):
    """The loss_type variants of one aggregation for surrogate='clip'."""
    return (exact({"loss_type": loss_type}, note, when={"surrogate": "clip"}),)


def _is_correction(mode: str):
    return exact(
        {"vllm_importance_sampling_correction": True, "vllm_importance_sampling_mode": mode},
        "TRL corrects with use_vllm=True (ablate: whenever the engine's log-probs are kept)",
    )


_LOSS_AGG = {
    "token_mean": one(
        exact({"loss_type": "dapo"}, when={"surrogate": "clip", "minibatches": "1"}),
        approx({"loss_type": "dapo"}, _MINIBATCH_NORM, when={"surrogate": "clip"}),
        exact({"loss_type": "cispo"}, when={"surrogate": "cispo", "minibatches": "1"}),
        approx({"loss_type": "cispo"}, _MINIBATCH_NORM, when={"surrogate": "cispo"}),
        cannot("TRL's sapo loss is a per-sequence token mean", when={"surrogate": "sapo"}),
        moot(_SURROGATE_NOT_IN_TRL),
    ),
    "seq_mean_token_mean": one(
        *_clip_family("grpo"),
        exact({"loss_type": "sapo"}, when={"surrogate": "sapo"}),
        cannot("TRL's cispo loss is a token mean (token_mean)", when={"surrogate": "cispo"}),
        moot(_SURROGATE_NOT_IN_TRL),
    ),
    "seq_mean_token_sum": one(
        *_clip_family(
            "luspo",
            "TRL logs a warning that luspo expects importance_sampling_level='sequence'; "
            "the loss is the clip loss summed per sequence either way",
        ),
        moot(_SURROGATE_NOT_IN_TRL, when={"surrogate": ("gmpo", "clip_cov", "kl_cov")}),
        cannot("only TRL's luspo (a clip loss) sums tokens per sequence"),
    ),
    "seq_mean_token_sum_norm": one(
        *_clip_family("dr_grpo", "the constant is max_completion_length (see loss_norm_constant)"),
        moot(_SURROGATE_NOT_IN_TRL, when={"surrogate": ("gmpo", "clip_cov", "kl_cov")}),
        cannot("only TRL's dr_grpo (a clip loss) divides by a constant"),
    ),
    "prompt_mean": one(cannot("TRL has no per-prompt aggregation")),
    "token_sum": one(cannot("every TRL loss_type normalises (by tokens, sequences or a constant)")),
}

TABLE: Table = {
    "advantage": {"group": one(exact()), "gae": one(cannot(_NO_CRITIC))},
    "baseline": {
        "group_mean": one(exact(note="TRL always subtracts the group mean")),
        "leave_one_out": one(
            approx(
                None,
                "TRL subtracts the group mean: its advantages are (G-1)/G of RLOO's "
                "(same direction, a smaller step)",
            )
        ),
        "none": one(cannot("TRL always subtracts the group mean")),
    },
    "scale": {
        "group_std": one(exact({"scale_rewards": "group"})),
        "batch_std": one(exact({"scale_rewards": "batch"})),
        "batch_centred_std": one(
            cannot("TRL's batch std is of the raw rewards (scale_rewards='batch' = batch_std)")
        ),
        "token_whiten": one(cannot("GRPOTrainer has no token-level whitening")),
        "mean": one(cannot("GRPOTrainer has no ÷ group mean (MaxRL is a separate trainer)")),
        "none": one(exact({"scale_rewards": "none"})),
    },
    "std_unbiased": {
        "True": one(exact(note="TRL's nanstd applies Bessel's correction (N-1)")),
        "False": one(approx(None, "TRL's std is always N-1 (nanstd, hard-coded)")),
    },
    "std_eps": {
        "1e-6": one(approx(None, "TRL adds 1e-4 to the std (hard-coded)")),
        "1e-4": one(exact(note="TRL's hard-coded epsilon")),
        "other": one(approx(None, "TRL adds 1e-4 to the std (hard-coded)")),
    },
    "gae_gamma": {"any": one(moot(_NO_CRITIC))},
    "gae_lambda": {"any": one(moot(_NO_CRITIC))},
    "vf_coef": {"any": one(moot(_NO_CRITIC))},
    "vf_clip": {"None": one(moot(_NO_CRITIC)), "a number": one(moot(_NO_CRITIC))},
    "whiten_advantages": {"True": one(moot(_NO_CRITIC)), "False": one(moot(_NO_CRITIC))},
    "critic_lr": {"None": one(moot(_NO_CRITIC)), "a number": one(moot(_NO_CRITIC))},
    "ratio_level": {
        "token": one(exact({"importance_sampling_level": "token"})),
        "sequence": one(exact({"importance_sampling_level": "sequence"})),
        "sequence_token": one(
            exact(
                {"importance_sampling_level": "sequence"},
                "TRL has no GSPO-token; with one advantage per sequence (always, in "
                "GRPOTrainer) it equals the sequence ratio in value and gradient",
            )
        ),
    },
    "surrogate": {
        "clip": one(exact(see="the clip family's loss_type is set by loss_agg")),
        "cispo": one(exact(see="loss_type='cispo', set by loss_agg")),
        "sapo": one(exact(see="loss_type='sapo', set by loss_agg")),
        "gmpo": one(cannot("TRL 1.16 has no GMPO loss")),
        "clip_cov": one(cannot("TRL 1.16 has no Clip-Cov loss")),
        "kl_cov": one(cannot("TRL 1.16 has no KL-Cov loss")),
    },
    "trust_region": {
        "ratio_clip": one(exact()),
        "dppo_tv": one(cannot("TRL 1.16 has no DPPO trust region")),
        "dppo_kl": one(cannot("TRL 1.16 has no DPPO trust region")),
    },
    "ratio_cap": {"None": one(exact()), "a number": one(cannot("TRL 1.16 has no DPPO"))},
    "positive_weight": {
        "1": one(exact()),
        "other": one(cannot("TRL 1.16 has no advantage-sign weighting")),
    },
    "reward_floor": {
        "0": one(exact()),
        "other": one(cannot("no config key: the reward_func's value for a wrong answer")),
    },
    "clip_low": {
        "below 1": one(
            exact({"epsilon": SELF}, when={"surrogate": "clip"}),
            cannot(
                "TRL's cispo caps the weight from above only: needs clip_low=1 (no lower bound)",
                when={"surrogate": "cispo"},
            ),
            moot(_SURROGATE_NOT_IN_TRL),
        ),
        "1 (no lower bound)": one(
            exact(note="TRL's cispo has no lower bound", when={"surrogate": "cispo"}),
            moot(_SURROGATE_NOT_IN_TRL),
        ),
    },
    "clip_high": {
        "any": one(
            exact({"epsilon_high": SELF}, when={"surrogate": "clip"}),
            exact(
                {"epsilon_high": Expr("1 + clip_high", lambda a, b: 1 + a.clip_high)},
                "TRL's cispo epsilon_high is the cap on the weight itself",
                when={"surrogate": "cispo"},
            ),
            moot(_SURROGATE_NOT_IN_TRL),
        )
    },
    "dual_clip": {
        "None": one(exact({"delta": None})),
        "above 1 + clip_high": one(
            exact(
                {"delta": SELF},
                "INTELLECT-2's two-sided clip caps every ratio at delta: the dual clip for A < 0, "
                "never binding for A > 0 above 1 + clip_high",
            )
        ),
        "up to 1 + clip_high": one(
            approx(
                {"delta": SELF},
                "TRL's delta also caps positive-advantage ratios, below 1 + clip_high",
            )
        ),
    },
    "sapo_tau_pos": {"any": one(exact({"sapo_temperature_pos": SELF}))},
    "sapo_tau_neg": {"any": one(exact({"sapo_temperature_neg": SELF}))},
    "cov_fraction": {"any": one(moot(_SURROGATE_NOT_IN_TRL))},
    "cov_clip_low": {"any": one(moot(_SURROGATE_NOT_IN_TRL))},
    "cov_clip_high": {"any": one(moot(_SURROGATE_NOT_IN_TRL))},
    "kl_cov_coef": {"any": one(moot(_SURROGATE_NOT_IN_TRL))},
    "loss_agg": _LOSS_AGG,
    "loss_norm_constant": {
        "None (max new tokens)": one(exact(note="dr_grpo divides by max_completion_length")),
        "an integer": one(
            approx(
                None,
                "TRL's dr_grpo divides by max_completion_length (the generation limit), "
                "not by loss_norm_constant",
            )
        ),
    },
    "kl_coef": {
        "0": one(exact({"beta": 0.0})),
        "above 0": one(
            exact(
                {"beta": SELF, "use_bias_correction_kl": False},
                "TRL's default use_bias_correction_kl=True multiplies the KL by the ratio",
                when={"kl_in": "loss"},
            ),
            moot("TRL's KL is in the loss only (see kl_in)"),
        ),
    },
    "kl_estimator": {
        "k1": one(cannot("TRL's KL term is k3 only")),
        "k2": one(cannot("TRL's KL term is k3 only")),
        "k3": one(exact(note="TRL's KL: exp(ref - logp) - (ref - logp) - 1")),
    },
    "kl_in": {
        "loss": one(exact()),
        "reward": one(cannot("GRPOTrainer adds the KL to the loss only")),
    },
    "entropy_coef": {
        "0": one(exact({"entropy_coef": 0.0})),
        "above 0": one(
            approx(
                {"entropy_coef": SELF},
                "TRL's bonus is each process's token-mean entropy, whatever loss_type; "
                "ablate aggregates it with loss_agg",
            )
        ),
    },
    "dynamic_sampling": {
        "False": one(exact()),
        "True": one(
            cannot(
                "GRPOTrainer neither drops nor refills flat groups (they stay, with advantage 0); "
                "export with --set dynamic_sampling=False to run the rest"
            )
        ),
    },
    "max_gen_batches": {"any": one(moot("no dynamic sampling in TRL"))},
    "mask_truncated": {
        "False": one(exact({"mask_truncated_completions": False})),
        "True": one(
            exact({"mask_truncated_completions": True}, when={"loss_agg": "token_mean"}),
            approx({"mask_truncated_completions": True}, _SEQ_MASK),
        ),
    },
    "overlong_buffer": {
        "0 (off)": one(exact()),
        "tokens or a share": one(
            exact(
                note="pass trl.rewards.get_soft_overlong_punishment(max_completion_len="
                "{max_new_tokens}, soft_punish_cache={overlong_buffer}) as the last reward_func"
            )
        ),
    },
    "overlong_penalty": {
        "any": one(
            exact(
                {
                    "reward_weights": Expr(
                        "[1.0, overlong_penalty]", lambda a, b: [1.0, a.overlong_penalty]
                    )
                },
                "one weight per reward_func: the task's reward, then the overlong punishment",
            )
        )
    },
    "zero_variance_filter": {
        "False": one(exact()),
        "True": one(cannot("GRPOTrainer keeps flat groups in the batch and its normalisers")),
    },
    "retire_pass_rate": {
        "None": one(exact()),
        "a number": one(cannot("TRL has no pass-rate-based prompt retirement")),
    },
    "reward_control": {
        "none": one(exact()),
        **{
            c: one(cannot(f"no config key: a reward_func that pays the {c} control"))
            for c in ("random", "noisy", "incorrect", "majority_vote", "format_only")
        },
    },
    "reward_control_p": {"any": one(cannot("no config key: the reward_func's probability"))},
    "reward_noise_fraction": {"any": one(cannot("no config key: the reward_func's noise share"))},
    "rollout_correction": {
        "none": one(
            exact(
                {"vllm_importance_sampling_correction": False},
                "TRL's default corrects with sequence_mask",
            )
        ),
        "token_truncate": one(_is_correction("token_truncate")),
        "token_mis": one(_is_correction("token_mask")),
        "sequence_mask": one(_is_correction("sequence_mask")),
        "geo_rs": one(cannot("TRL has no geometric-mean sequence rejection")),
        "k3_rs": one(cannot("TRL has no k3 sequence rejection")),
        "opsm": one(
            approx(
                {"vllm_importance_sampling_correction": False},
                "TRL takes OPSM's KL against π_θ at each update (ablate: before the updates, "
                "equal at the first) and from the engine's log-probs only with use_vllm=True",
            )
        ),
        "m2po": one(cannot("TRL has no M2PO second-moment mask")),
    },
    "rollout_correction_cap": {"any": one(exact({"vllm_importance_sampling_clip_max": SELF}))},
    "rollout_correction_floor": {
        "None": one(
            exact({"vllm_importance_sampling_clip_min": Expr("1/cap", lambda a, b: lower_bound(a))})
        ),
        "a number": one(exact({"vllm_importance_sampling_clip_min": SELF})),
    },
    "opsm_delta": {"any": one(exact({"off_policy_mask_threshold": SELF}))},
    "rollout_precision": {
        "trainer": one(exact()),
        **{
            p: one(cannot("ablate's CPU stand-in: TRL sets the rollout engine's own dtype"))
            for p in ("bf16", "fp16")
        },
    },
    "rollout_staleness": {
        "0": one(exact()),
        "above 0": one(
            cannot("TRL's GRPOTrainer samples from the current policy (no lag setting)")
        ),
    },
    "ppo_epochs": {"any": one(exact({"num_iterations": SELF}))},
    "minibatches": {
        "1": one(exact({"steps_per_generation": SELF})),
        "above 1": one(
            exact(
                {"steps_per_generation": SELF},
                "with gradient_accumulation_steps=1: one optimizer step per slice",
            )
        ),
    },
}
