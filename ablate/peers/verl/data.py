"""verl's expression of the KL, entropy, data-side (dynamic sampling, overlong, reward
controls, rollout correction) and update-schedule fields of `Algorithm` (in field order)."""

from __future__ import annotations

from ablate.factors.rollout_corrections import lower_bound
from ablate.peers.model import SELF, Expr, Table, approx, cannot, exact, one
from ablate.peers.verl.keys import (
    ALG,
    OB,
    RC,
    RS_FLOOR,
    A,
    correction,
    k_note,
    mini_batch,
    rejection,
)


def _icepop_band(a, b) -> str:
    return f"{lower_bound(a):.12g}_{a.rollout_correction_cap:.12g}"


def _geo_band(a, b) -> str:
    return f"{1 / a.rollout_correction_cap:.12g}_{1 / lower_bound(a):.12g}"  # 0.999, not 0.99899…


DATA: Table = {
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
            exact({A + "kl_loss_type": k}, k_note(k), when={"kl_in": "loss"}),
            exact({ALG + "kl_penalty": k}, k_note(k)),
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
            for c in ("random", "noisy", "incorrect", "majority_vote", "format_only")
        },
    },
    "reward_control_p": {"any": one(cannot("no config key: the reward function's probability"))},
    "reward_noise_fraction": {"any": one(cannot("no config key: the reward function's noise"))},
    "reward_floor": {
        "0": one(exact()),
        "other": one(cannot("no config key: the reward function's score for a wrong answer")),
    },
    "rollout_correction": {
        "none": one(exact({RC + "rollout_is": None, RC + "rollout_rs": None})),
        "token_truncate": one(correction("token")),
        "token_mis": one(correction("token")),
        "sequence_mask": one(correction("sequence")),
        "geo_rs": one(rejection("seq_mean_k1")),
        "k3_rs": one(rejection("seq_mean_k3")),
        "opsm": one(cannot("verl 0.9.1 has no off-policy sequence masking (DeepSeek-V3.2 OPSM)")),
        "m2po": one(cannot("verl 0.9.1 has no M2PO second-moment mask (AReaL m2_threshold)")),
    },
    "rollout_correction_cap": {
        "any": one(
            exact(
                {RC + "rollout_is_threshold": SELF}, when={"rollout_correction": "token_truncate"}
            ),
            exact(
                {RC + "rollout_is_threshold": Expr("<floor>_<cap>", _icepop_band)},
                "IcePop bounds: weights outside [floor, cap] are zeroed",
                when={"rollout_correction": "token_mis"},
            ),
            exact(
                {RC + "rollout_rs_threshold": Expr("<1/cap>_<1/floor>", _geo_band)},
                "verl bounds exp(mean −log ρ): ablate's band [floor, cap] inverted",
                when={"rollout_correction": "geo_rs"},
            ),
            exact(
                {
                    RC + "rollout_is_threshold": Expr(
                        f"{RS_FLOOR}_<cap>", lambda a, b: f"{RS_FLOOR}_{a.rollout_correction_cap}"
                    )
                },
                "IcePop bounds: weights above the cap are zeroed; the floor never masks",
            ),
        )
    },
    "rollout_correction_floor": {
        "None": one(exact(note="1/cap, in the threshold the cap sets")),
        "a number": one(exact(note="in the threshold the cap sets")),
    },
    "rejection_k3_max": {"any": one(exact({RC + "rollout_rs_threshold": SELF}))},
    "rollout_precision": {
        "trainer": one(exact()),
        **{
            p: one(cannot("ablate's CPU stand-in: verl sets the rollout engine's own dtype"))
            for p in ("bf16", "fp16")
        },
    },
    "rollout_staleness": {
        "0": one(exact()),
        "above 0": one(
            cannot(
                "verl 0.9.1's PPO trainer is synchronous (its async recipes are other entry points)"
            )
        ),
    },
    "ppo_epochs": {"any": one(exact({A + "ppo_epochs": SELF}))},
    "minibatches": {
        "1": one(exact({A + "ppo_mini_batch_size": Expr("prompts / minibatches", mini_batch)})),
        "above 1": one(
            exact({A + "ppo_mini_batch_size": Expr("prompts / minibatches", mini_batch)})
        ),
    },
}
