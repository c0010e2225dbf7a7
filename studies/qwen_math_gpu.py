"""Template for a real checkpoint on a GPU with vLLM (never run in CI).

Set ABLATE_QWEN_MATH to a local Qwen2.5-Math checkpoint folder and ABLATE_MATH_DATA to a local
MATH-style jsonl/parquet file (`problem`, `solution` with \\boxed{}), install the extra
(`pip install -e '.[vllm]'`), then `make study STUDY=studies/qwen_math_gpu.py`. Nothing is
downloaded: both paths must exist. Settings follow Dr. GRPO's App. G (G=8, temperature 1,
lr 1e-6, 3000 new tokens) and compare its qwen_math template with no template (Dr. GRPO §2:
the template changes what the base model answers).

All arms share one update schedule (4 mini-batches per rollout) and no KL: DAPO's preset takes
16 updates per rollout and GRPO's a KL of 0.04, which would otherwise be credited to the
algorithms' other factors."""

import os

from ablate.study import Budget, EvalSpec, Optim, PassKSpec, Study, arm

MODEL = os.environ.get("ABLATE_QWEN_MATH", "/models/Qwen2.5-Math-1.5B")
DATA = os.environ.get("ABLATE_MATH_DATA", "/data/math_level3to5.jsonl")
MATCHED = {"minibatches": 4, "kl_coef": 0.0}

STUDY = Study(
    name="qwen_math_gpu",
    task="math",
    task_options={"path": DATA},
    base_models=[MODEL],
    templates=["qwen_math", "none"],
    arms=[
        arm("grpo", "grpo", **MATCHED),
        arm("dr_grpo", "dr_grpo", **MATCHED),
        arm("dapo", "dapo", **MATCHED),
    ],
    seeds=[0, 1],
    budget=Budget(max_steps=200, prompts_per_step=128, group_size=8, max_new_tokens=3000),
    optim=Optim(lr=1e-6, betas=(0.9, 0.95)),
    eval=EvalSpec(every=25, n_samples=4, ks=(1, 4), max_problems=500),
    passk=PassKSpec(n=8, ks=(1, 8), max_problems=500),
    engine="vllm",
    device="cuda",
)
