"""Measure a checkpoint's Pass@1 / Pass@k under a template with the shared rollout engine:
fixed eval problems, fixed sampling seed, so the same weights always measure the same."""

from __future__ import annotations

import torch

from ablate.base import seeding
from ablate.base.passk import mean_pass_at_k
from ablate.base.records import SamplingParams
from ablate.models.recipe import PassKMeasure
from ablate.rollout.hf import HFEngine
from ablate.rollout.sample import correct_matrix, sample_and_verify


def measure_passk(model, tokenizer, task, template, spec: PassKMeasure) -> dict[str, float]:
    """{"pass1", "pass8" (k = spec.samples), "format_ok"} over `spec.problems` eval problems."""

    problems = task.problems("eval")[: spec.problems]
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
        engine = HFEngine(model, tokenizer, fused=False)
        batch = sample_and_verify(engine, problems, template, task, sampling, n=spec.samples)
    model.train(was_training)
    correct = correct_matrix(batch, spec.samples)
    format_ok = sum(bool(v.format_ok) for v in batch.verdicts)
    return {
        "pass1": round(mean_pass_at_k(correct, 1), 4),
        f"pass{spec.samples}": round(mean_pass_at_k(correct, spec.samples), 4),
        "format_ok": round(format_ok / max(1, len(batch.verdicts)), 4),
    }
