"""Supervised pretraining of a tiny base model on worked solutions: every step draws a fresh
batch of training problems, renders them with the corpus template, and trains on the
completion tokens only. Deterministic: the same recipe in the same environment (torch version,
CPU float kernels, threads) gives bit-identical weights; another CPU gives other weights."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from ablate.base import seeding
from ablate.models.recipe import ModelSize, PretrainSpec

IGNORE_INDEX = -100  # label value the Hugging Face loss skips


def build_model(size: ModelSize, tokenizer: PreTrainedTokenizerFast, seed: int) -> LlamaForCausalLM:
    """A freshly initialised Llama causal LM for `tokenizer`'s vocabulary (seeded init)."""
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=size.hidden,
        intermediate_size=size.intermediate,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.heads,
        max_position_embeddings=size.max_positions,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    seeding.seed_everything(seeding.derive_seed(seed, "pretrain", "init"))
    return LlamaForCausalLM(config)


@dataclass(frozen=True)
class CorpusLine:
    prompt: str
    completion: str  # worked solution without EOS


def encode_batch(lines: list[CorpusLine], tokenizer: PreTrainedTokenizerFast) -> dict:
    """`<bos> prompt completion <eos>`, right-padded; labels only on completion + EOS."""
    prompts = tokenizer([x.prompt for x in lines], add_special_tokens=False)["input_ids"]
    completions = tokenizer([x.completion for x in lines], add_special_tokens=False)["input_ids"]
    bos, eos, pad = tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id
    rows = [([bos, *p], [*c, eos]) for p, c in zip(prompts, completions, strict=True)]
    width = max(len(p) + len(c) for p, c in rows)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (p, c) in enumerate(rows):
        n = len(p) + len(c)
        input_ids[i, :n] = torch.tensor(p + c)
        labels[i, len(p) : n] = torch.tensor(c)
        attention_mask[i, :n] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def corpus_lines(
    task, template, spec: PretrainSpec, step: int, batch_size: int | None = None
) -> list[CorpusLine]:
    """The batch of step `step`: its own RNG stream, so a step's data never depends on others."""
    rng = seeding.rng(spec.seed, "pretrain", "batch", str(step))
    problems = task.problems("train")
    lines = []
    for _ in range(batch_size or spec.batch_size):
        problem = problems[rng.randrange(len(problems))]
        completion = task.sample_solution(problem, template, rng)
        lines.append(CorpusLine(template.render(problem.question), completion))
    return lines


def warmup_factor(warmup_steps: int) -> Callable[[int], float]:
    """Linear warm-up over `warmup_steps` optimizer steps, then constant."""
    return lambda done: min(1.0, (done + 1) / max(1, warmup_steps))


def train_steps(
    model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, task, template, spec: PretrainSpec
) -> Iterator[tuple[int, float]]:
    """Run the recipe's optimizer steps, yielding (step, loss) after each (step counts from 1).

    The caller may stop early or inspect/measure the model between steps; measuring must not
    consume the global torch RNG (nothing here uses it after init, so it cannot matter)."""
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=spec.lr, weight_decay=spec.weight_decay, foreach=False
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_factor(spec.warmup_steps))
    for step in range(1, spec.max_steps + 1):
        model.train()
        batch = encode_batch(corpus_lines(task, template, spec, step), tokenizer)
        loss = model(**batch).loss
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"pretraining loss is {loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        optimizer.step()
        schedule.step()
        yield step, loss.item()
