"""What "GRPO" means in each framework: the factor vector its `grpo` runs by default, read from its
source at a named commit or release. `arm(name, "grpo@nemo_rl")` (and `ablate export
grpo@nemo_rl --to verl`) load the vector; `ablate aliases` prints the table.

A result "GRPO vs X" is ambiguous until the vector is named: the group statistics alone differ
(group mean + group std in TRL, verl, SkyRL and slime; leave-one-out mean + std in NeMo-RL; batch
whitening in AReaL; mean only in prime-rl, the Tinker cookbook and nanochat). Each entry lists the
`Algorithm` fields it sets (the rest keep ablate's defaults, which the entry names as not
checked), what ablate can only approximate, and where each value was read. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ablate.base.errors import ConfigError
from ablate.factors.algorithms import Algorithm
from ablate.peers.model import inert_fields

#: The fields every entry states (each either read from the source or listed as not checked).
FACTOR_FIELDS = (
    "baseline",
    "scale",
    "std_eps",
    "loss_agg",
    "clip_low",
    "clip_high",
    "dual_clip",
    "kl_coef",
    "kl_estimator",
    "minibatches",
)


@dataclass(frozen=True)
class Alias:
    """One framework's name for an algorithm and the ablate factor vector it runs by default."""

    framework: str
    name: str
    source: str
    """Where the values were read: repository @ commit (or release) and files."""
    fields: Mapping[str, Any]
    """The Algorithm fields read from the source (a field not listed keeps ablate's default)."""
    approximate: tuple[str, ...] = ()
    """Where the framework differs from the vector in a way ablate has no level for."""
    unchecked: tuple[str, ...] = field(default=())
    """FACTOR_FIELDS not read from the source: they keep ablate's defaults."""

    @property
    def spelling(self) -> str:
        return f"{self.name}@{self.framework}"

    @property
    def algorithm(self) -> Algorithm:
        return Algorithm(**self.fields)


_TRL = "huggingface/trl @ f2cd577 (1.10.0.dev0): trl/trainer/grpo_config.py, grpo_trainer.py"
_VERL = "verl 0.9.1 (PyPI wheel): trainer/config/_generated_ppo_trainer.yaml, ppo/core_algos.py"
_NEMO = (
    "NVIDIA-NeMo/RL @ 00294d9: examples/configs/grpo_math_1B.yaml; @ 0043953: "
    "nemo_rl/algorithms/utils.py (calculate_baseline_and_std_per_prompt, calculate_kl)"
)
_AREAL = "inclusionAI/AReaL @ 8a15475: examples/math/gsm8k_grpo.yaml (group_adv_norm: false)"
_PRIME = "PrimeIntellect-ai/prime-rl @ 0fad630: src/prime_rl/orchestrator/advantage.py"
_SKYRL = "NovaSky-AI/SkyRL @ 45179d4: skyrl-train/skyrl_train/config/ppo_base_config.yaml"
_SLIME = (
    "THUDM/slime @ 624b824 (2026-08-21): slime/ray/rollout.py (_post_process_rewards), "
    "slime/utils/arguments.py"
)
_TINKER = "thinking-machines-lab/tinker-cookbook @ 11885f5: tinker_cookbook/rl/data_processing.py"
_NANOCHAT = "karpathy/nanochat @ 030de3a: scripts/chat_rl.py"
_LOSS_ONLY_ADVANTAGE = ("std_eps", "loss_agg", "clip_low", "clip_high", "dual_clip")

ALIASES: tuple[Alias, ...] = (
    Alias(
        "trl",
        "grpo",
        _TRL,
        {"scale": "group_std", "std_eps": 1e-4, "loss_agg": "token_mean", "kl_coef": 0.0},
        ("loss_type='dapo' divides by the generation batch's token count (= token_mean here)",),
    ),
    Alias(
        "verl",
        "grpo",
        _VERL,
        {"loss_agg": "token_mean", "dual_clip": 3.0, "kl_coef": 0.0, "minibatches": 4},
        ("train_batch_size 1024 / ppo_mini_batch_size 256 prompts: 4 updates per rollout",),
    ),
    Alias(
        "nemo_rl",
        "grpo",
        _NEMO,
        {"baseline": "leave_one_out", "loss_agg": "token_mean", "kl_coef": 0.01},
        (
            "the std is leave-one-out too (of the other G-1 rewards); ablate's group_std is the "
            "whole group's",
            "calculate_kl clamps log r at ±20 and k3 at 10 per token",
        ),
        ("std_eps",),
    ),
    Alias(
        "areal",
        "grpo",
        _AREAL,
        {"baseline": "none", "scale": "token_whiten", "clip_low": 0.4, "clip_high": 0.4},
        (
            "advantages whitened over the batch (masked mean and std) after reward scaling "
            "10·(r - 0.5); ablate's token_whiten is verl's form (N-1, eps 1e-8)",
            "asynchronous (max_head_offpolicyness 2) with a decoupled loss: not modelled",
        ),
        ("loss_agg", "dual_clip"),
    ),
    Alias(
        "prime_rl",
        "grpo",
        _PRIME,
        {"scale": "none"},
        ("AdvantageConfig defaults: group mean, no std (global_std_norm=False)",),
        ("kl_coef", "kl_estimator", "minibatches", *_LOSS_ONLY_ADVANTAGE),
    ),
    Alias(
        "skyrl",
        "grpo",
        _SKYRL,
        {"loss_agg": "token_mean", "kl_coef": 0.001, "minibatches": 4},
        ("train_batch_size 1024 / policy_mini_batch_size 256: 4 updates per rollout",),
        ("std_eps",),
    ),
    Alias(
        "slime",
        "grpo",
        _SLIME,
        {"kl_coef": 0.0},
        ("group mean, then ÷ (torch.std + 1e-6); per-sample loss (calculate_per_token_loss off)",),
        ("minibatches",),
    ),
    Alias(
        "tinker_cookbook",
        "grpo",
        _TINKER,
        {"scale": "none"},
        ("compute_advantages: rewards - group mean; Tinker's losses sum over tokens",),
        ("kl_coef", "kl_estimator", "minibatches", *_LOSS_ONLY_ADVANTAGE),
    ),
    Alias(
        "nanochat",
        "grpo",
        _NANOCHAT,
        {"scale": "none", "loss_agg": "prompt_mean", "kl_coef": 0.0},
        (
            "REINFORCE on-policy (no ratio, no clip: the clip never binds with one update)",
            "each pass's token mean, passes averaged: prompt_mean when a group fits one pass",
        ),
        ("clip_low", "clip_high", "dual_clip"),
    ),
)


# --- rollout-correction presets: each framework's grpo plus its correction spelling -----------
_VERL_RC = "verl 0.9.1 (PyPI wheel): trainer/config/algorithm.py (RolloutCorrectionConfig presets)"
_TRL_RC = "trl 1.16.0 (PyPI wheel): trl/trainer/grpo_trainer.py, grpo_config.py"
_BYPASS = (
    "bypass mode: verl's ratio uses π_engine as π_old and rejects on π_θ/π_engine; ablate runs "
    "decoupled (the ratio on the trainer's π_old, the correction on π_old/π_engine): equal "
    "without mismatch and at the first update"
)
_REINFORCE = "loss_type='reinforce' (no clip); ablate keeps its clip (it binds only off-policy)"
#: verl's geo_rs default "0.999_1.001" bounds exp(mean −log ρ); ablate's band is its reciprocal
_GEO = {"rollout_correction": "geo_rs", "rollout_correction_cap": 1 / 0.999}
_GEO["rollout_correction_floor"] = 1 / 1.001


def _with_correction(
    framework: str, name: str, source: str, fields: dict, approximate: tuple[str, ...] = ()
) -> Alias:
    base = next(a for a in ALIASES if a.spelling == f"grpo@{framework}")
    return Alias(
        framework,
        name,
        source,
        {**base.fields, **fields},
        (*base.approximate, *approximate),
        base.unchecked,
    )


CORRECTION_ALIASES: tuple[Alias, ...] = (
    _with_correction("verl", "bypass_ppo_clip", _VERL_RC, {}, (_BYPASS,)),
    _with_correction("verl", "bypass_ppo_clip_geo_rs", _VERL_RC, _GEO, (_BYPASS,)),
    _with_correction(
        "verl",
        "bypass_ppo_clip_k3_rs",
        _VERL_RC,
        {"rollout_correction": "k3_rs", "rejection_k3_max": 0.01},
        (_BYPASS,),
    ),
    _with_correction("verl", "bypass_pg_geo_rs", _VERL_RC, _GEO, (_BYPASS, _REINFORCE)),
    _with_correction(
        "verl",
        "bypass_pg_token_icepop",
        _VERL_RC,
        {
            "rollout_correction": "token_mis",
            "rollout_correction_cap": 5.0,
            "rollout_correction_floor": 0.5,
        },
        (_BYPASS, _REINFORCE),
    ),
    _with_correction(
        "verl",
        "decoupled_token_is",
        _VERL_RC,
        {"rollout_correction": "token_truncate", "rollout_correction_cap": 2.0},
    ),
    _with_correction("verl", "decoupled_geo_rs", _VERL_RC, _GEO),
    _with_correction(
        "verl",
        "decoupled_k3_rs",
        _VERL_RC,
        {"rollout_correction": "k3_rs", "rejection_k3_max": 0.01},
    ),
    *(
        _with_correction("trl", mode, _TRL_RC, {"rollout_correction": level, **extra}, notes)
        for mode, level, extra, notes in (
            ("token_truncate", "token_truncate", {}, ()),
            ("sequence_mask", "sequence_mask", {}, ()),
            (
                "token_mask",
                "token_mis",
                {"rollout_correction_floor": 1e-10},
                ("vllm_importance_sampling_clip_min=None: a floor below e^-20 never masks",),
            ),
            (
                "off_policy_mask_threshold",
                "opsm",
                {},
                ("TRL also applies its IS correction (sequence_mask by default) with OPSM",),
            ),
        )
    ),
)
ALIASES = (*ALIASES, *CORRECTION_ALIASES)


def aliases() -> dict[str, Alias]:
    """Every alias by its spelling, e.g. "grpo@nemo_rl"."""
    return {a.spelling: a for a in ALIASES}


def alias_algorithm(spelling: str) -> Algorithm:
    """The factor vector of `spelling` ("grpo@nemo_rl"); ConfigError listing the valid ones."""
    table = aliases()
    if spelling not in table:
        valid = ", ".join(table)
        raise ConfigError(f"unknown framework alias {spelling!r}; valid: {valid}")
    return table[spelling].algorithm


def rows() -> list[tuple[str, ...]]:
    """The table `ablate aliases` prints: one row per alias, its factor vector (the fields the
    vector reads; `?` marks one not checked in the source, at ablate's default) and its source."""

    out = []
    for a in ALIASES:
        algo = a.algorithm
        unread = inert_fields(algo)
        extra = [n for n in a.fields if n not in FACTOR_FIELDS]  # a correction preset's
        shown = [n for n in (*FACTOR_FIELDS, *extra) if n not in unread]
        vector = ", ".join(
            f"{n}={getattr(algo, n)!r}" + ("?" if n in a.unchecked else "") for n in shown
        )
        out.append((a.spelling, vector, "; ".join(a.approximate), a.source))
    return out
