"""The aligned rung: a built zoo model made confident by rounds of rejection-sampling
fine-tuning on its own correct answers (`recipe.AlignSpec`), then measured like every rung,
plus the mean token entropy of its samples against its source's."""

from __future__ import annotations

import math
import random
from pathlib import Path

import torch

from ablate.base import seeding
from ablate.base.records import SamplingParams
from ablate.models import load_model, store
from ablate.models.pretrain import CorpusLine, encode_batch
from ablate.models.recipe import AlignSpec, ZooRecipe
from ablate.rollout.hf import HFEngine
from ablate.rollout.sample import sample_and_verify
from ablate.tasks import get_task
from ablate.tasks.templates import get_template
from ablate.zoo.built import BuildResult, BuiltModel, meta_for
from ablate.zoo.measure import measure_passk


def build_aligned(recipe: ZooRecipe, scratch: Path, progress, env: dict):
    """Build `recipe.name` from `recipe.align.source` into `scratch/<name>`; a `BuildResult`."""

    spec, pre = recipe.align, recipe.pretrain
    task = get_task(pre.task, seed=pre.seed, **dict(pre.task_options))
    template = get_template(pre.template)
    model, tokenizer = load_model(spec.source)
    source_entropy = measure_entropy(model, tokenizer, task, template, recipe)
    curve = []
    for round_ in range(1, spec.rounds + 1):
        kept, sampled = own_correct_answers(model, tokenizer, task, template, spec, round_)
        loss = fine_tune(model, tokenizer, kept, spec, round_)
        measured = measure_passk(model, tokenizer, task, template, recipe.eval)
        curve.append({"round": round_, "kept": len(kept), "sampled": sampled, "loss": loss})
        curve[-1].update(measured)
        if progress is not None:
            progress(round_, spec.rounds, loss, measured)
    measured = {
        t: measure_passk(model, tokenizer, task, get_template(t), recipe.eval)
        for t in recipe.eval.templates
    }
    confidence = {
        "entropy": measure_entropy(model, tokenizer, task, template, recipe),
        "source": spec.source,
        "source_entropy": source_entropy,
        "rounds": curve,
    }
    meta = {**meta_for(recipe, recipe.name, 0, measured, True), "build_env": env}
    store.save_checkpoint(model, tokenizer, scratch / recipe.name, {**meta, **confidence})
    digest = store.weights_sha256(scratch / recipe.name)
    built = BuiltModel(recipe.name, 0, scratch / recipe.name, measured, True, digest)
    return BuildResult(recipe=recipe, out_dir=scratch, models=[built], curve=[], env=env)


def own_correct_answers(model, tokenizer, task, template, spec: AlignSpec, round_: int):
    """(kept (prompt, completion) pairs, samples drawn): the model's correct answers to
    `spec.problems` training problems, `spec.samples` each, at temperature 1."""

    pick = seeding.rng(spec.seed, "align", "problems", str(round_))
    pool = task.problems("train")
    problems = [pool[i] for i in pick.sample(range(len(pool)), spec.problems)]
    sampling = SamplingParams(
        max_new_tokens=80,
        stop=tuple(template.stop),
        seed=seeding.derive_seed(spec.seed, "align", "sample", str(round_)),
    )
    model.eval()
    with torch.no_grad():
        batch = sample_and_verify(
            HFEngine(model, tokenizer), problems, template, task, sampling, n=spec.samples
        )
    r = batch.rollouts  # per sample: its rendered prompt, its completion text
    pairs = zip(r.prompts, r.texts, batch.correct.tolist(), strict=True)
    kept = [(prompt, text) for prompt, text, ok in pairs if ok]
    return kept, len(batch.rollouts.texts)


def fine_tune(model, tokenizer, kept, spec: AlignSpec, round_: int) -> float:
    """`spec.steps` AdamW steps on random batches of `kept`; the last step's loss."""

    if not kept:
        raise RuntimeError("aligning: the source model answered no training problem correctly")
    draw = random.Random(seeding.derive_seed(spec.seed, "align", "batches", str(round_)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=0.0, foreach=False)
    model.train()
    loss_value = math.nan
    for _ in range(spec.steps):
        lines = [CorpusLine(*kept[draw.randrange(len(kept))]) for _ in range(spec.batch_size)]
        loss = model(**encode_batch(lines, tokenizer)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss_value = loss.item()
    model.eval()
    return round(loss_value, 4)


def measure_entropy(model, tokenizer, task, template, recipe: ZooRecipe) -> float:
    """Mean per-token entropy (nats) of the model's samples on the zoo's eval problems, with
    the Pass@k measurement's sampling: how confident the model is where it answers."""

    spec = recipe.eval
    sampling = SamplingParams(
        max_new_tokens=spec.max_new_tokens,
        temperature=spec.temperature,
        stop=tuple(template.stop),
        seed=seeding.derive_seed(spec.seed, "zoo", "entropy", template.name),
    )
    problems = task.problems("eval")[: spec.problems]
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        engine = HFEngine(model, tokenizer)
        batch = sample_and_verify(engine, problems, template, task, sampling, n=spec.samples)
    r = batch.rollouts
    return round(float((r.entropy * r.completion_mask).sum() / r.completion_mask.sum()), 4)
