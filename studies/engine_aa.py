"""Engine A/A: the same GRPO arm on the same seeds, sampled by ablate's own sampler (`hf`) and by
vLLM (its CPU build here, `engine="vllm"` on the second arm only). Nothing differs but the
engine: the report's task-level test must call the two equivalent within ±0.03 Δ pass@1, or the
vLLM path changes results. Run in the vLLM lane's venv: `.venv-vllm/bin/ablate run
studies/engine_aa.py` (after `make install-vllm`).

The trials share their data order, initial weights and eval samples (common random numbers);
each engine draws its own samples (vLLM's seeded per-request streams are not the HF sampler's),
so the pair differs as two rollout streams of one algorithm do, like `aa_check.py`'s replicate.
The quickstart's budget and eval (50 steps of 8 × 8, 4 mini-batches per rollout, no KL; the
whole 256-problem eval split × 2 samples), 16 seeds. Fewer do not decide ±0.03: the two engines'
seeds differ as any two rollout streams of one algorithm do (SD of the paired difference 0.037
over the first 10 seeds, measured), which left the interval at [−0.05, +0.06] with 5 seeds and
[−0.017, +0.037] with 10, inconclusive both times.
"""

from ablate.study import Budget, EvalSpec, Study, arm

MATCHED = {"minibatches": 4, "kl_coef": 0.0}

STUDY = Study(
    name="engine_aa",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[
        arm("grpo_hf", "grpo", **MATCHED),
        arm("grpo_vllm", "grpo", engine="vllm", **MATCHED),
    ],
    seeds=list(range(16)),
    budget=Budget(max_steps=50, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(every=25, n_samples=2, ks=(1, 2)),
    passk=None,
    effect_of_interest=0.03,
    equivalence_margin=0.03,
    checkpoint_every=25,
)
