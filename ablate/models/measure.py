"""Measure a checkpoint's Pass@1 / Pass@k under a template with the shared rollout engine:
fixed eval problems, fixed sampling seed, so the same weights always measure the same."""

from __future__ import annotations

import numpy as np
import torch

from ablate import seeding
from ablate.models.recipe import EvalSpec


def measure_passk(model, tokenizer, task, template, spec: EvalSpec) -> dict[str, float]:
    """{"pass1", "pass8" (k = spec.samples), "format_ok"} over `spec.problems` eval problems."""
    from ablate.passk import pass_at_k
    from ablate.rollout.base import SamplingParams
    from ablate.rollout.hf import HFEngine

    problems = task.problems("eval")[: spec.problems]
    prompts = [template.render(p.question) for p in problems]
    sampling = SamplingParams(
        max_new_tokens=spec.max_new_tokens,
        temperature=spec.temperature,
        stop=tuple(getattr(template, "stop", ()) or ()),
        seed=seeding.derive_seed(spec.seed, "zoo", "eval", template.name),
    )
    was_training = model.training
    model.eval()
    # Keep the global RNG untouched so measuring mid-run cannot change the training run.
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        # transformers' forward, not the fused one: the ladder's recorded Pass@k (and so which
        # checkpoints became rungs) must reproduce bit for bit under `ablate zoo build --check`
        rollouts = HFEngine(model, tokenizer, fused=False).generate(
            prompts, spec.samples, sampling, problem_ids=[p.id for p in problems]
        )
    model.train(was_training)
    correct = np.zeros(len(problems), dtype=np.int64)
    format_ok = 0
    for i, text in enumerate(rollouts.texts):
        verdict = task.verify(problems[i // spec.samples], text, template)
        correct[i // spec.samples] += int(bool(verdict.correct))
        format_ok += int(bool(verdict.format_ok))
    n = np.full(len(problems), spec.samples)
    return {
        "pass1": round(float(np.mean(pass_at_k(n, correct, 1))), 4),
        f"pass{spec.samples}": round(float(np.mean(pass_at_k(n, correct, spec.samples))), 4),
        "format_ok": round(format_ok / max(1, len(rollouts.texts)), 4),
    }
