"""The quickstart's first contrast on vLLM: GRPO vs Dr. GRPO, every trial sampled by vLLM
(`engine="vllm"`; its CPU build on a CPU), 2 seeds at half the quickstart's budget (25 steps of
8 × 8, 4 mini-batches per rollout, no KL), evaluated on the whole eval split. A smoke-sized study
of the real engine path: sampling, weight sync after every update, the off-policy diagnostics of
vLLM against the trainer, and the report. Run in the vLLM lane's venv:
`.venv-vllm/bin/ablate run studies/vllm_quickstart.py` (after `make install-vllm`).
"""

from ablate.study import Budget, EvalSpec, Study, arm

MATCHED = {"minibatches": 4, "kl_coef": 0.0}

STUDY = Study(
    name="vllm_quickstart",
    task="arithmetic",
    base_models=["rl_ready"],
    templates=["plain"],
    arms=[arm("grpo", "grpo", **MATCHED), arm("dr_grpo", "dr_grpo", **MATCHED)],
    seeds=[0, 1],
    engine="vllm",
    budget=Budget(max_steps=25, prompts_per_step=8, group_size=8, max_new_tokens=80),
    eval=EvalSpec(n_samples=2, ks=(1, 2)),
    passk=None,
    effect_of_interest=0.03,
    equivalence_margin=0.03,
)
