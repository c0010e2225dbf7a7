"""Off-policy RL as an ablation axis: which rollout corrections matter at which train–inference
mismatch, on the RL-ready base with matched seeds.

Mismatch levels (issue 45): none (the engine is the trainer: every correction must be inert and
the report's "took effect" table says so), bf16 rollouts (the engine samples from a bf16 copy of
the weights while the trainer learns in fp32), staleness 2 and 4 (rollouts from the policy 2
or 4 updates old, as asynchronous trainers run), and vLLM (the real engine's kernels against the
trainer's forward, the mismatch the corrections exist for: `engine="vllm"` on those arms, its
CPU build here; run the study with `.venv-vllm/bin/ablate`, after `make install-vllm`).
Corrections at their peers' defaults: none, token TIS (verl decoupled_token_is: cap 2), token
MIS/IcePop (verl bypass_pg_token_icepop: band [0.5, 5]), geo_rs (verl's seq_mean_k1 default
band ±0.1%) and OPSM (TRL's example δ = 0.5).

Every arm runs GRPO's core with 4 mini-batches per rollout and no KL (quickstart's schedule), so
arms differ only in the mismatch and the correction; the reference is no mismatch, no correction.
At 5 seeds this is a screen: the report's task-level contrasts say which corrections move pass@1
beyond ±0.03 at which mismatch, and its diagnostics (offpolicy/ metrics: log-prob gap, Pearson
correlation, k3 KL, masked share, ESS) say how large each mismatch was.
"""

from ablate.study import Budget, EvalSpec, Study, arm

MATCHED = {"minibatches": 4, "kl_coef": 0.0}

MISMATCHES = {
    "none": {},
    "bf16": {"rollout_precision": "bf16"},
    "stale2": {"rollout_staleness": 2},
    "stale4": {"rollout_staleness": 4},
    "vllm": {"engine": "vllm"},  # an arm's own engine (`arm(engine=...)`), not a factor field
}
CORRECTIONS = {
    "plain": {},
    "tis": {"rollout_correction": "token_truncate", "rollout_correction_cap": 2.0},
    "mis": {
        "rollout_correction": "token_mis",
        "rollout_correction_cap": 5.0,
        "rollout_correction_floor": 0.5,
    },
    "geo_rs": {
        "rollout_correction": "geo_rs",
        "rollout_correction_cap": 1 / 0.999,
        "rollout_correction_floor": 1 / 1.001,
    },
    "opsm": {"rollout_correction": "opsm", "opsm_delta": 0.5},
}

STUDY = Study(
    name="offpolicy",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[
        arm(f"{m}_{c}", "grpo", **MATCHED, **mismatch, **correction)
        for m, mismatch in MISMATCHES.items()
        for c, correction in CORRECTIONS.items()
    ],
    seeds=[0, 1, 2, 3, 4],
    budget=Budget(max_steps=50, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=25, n_samples=2, ks=(1, 2)),
    effect_of_interest=0.03,
)
