"""Rollout throughput: `HFEngine` (tokens + log-probs + entropy) against `model.generate`
(tokens only) at training batch shapes.

Both sample exactly `new_tokens` tokens per sequence (EOS ignored), and runs are interleaved
A B A B so that load on a shared machine hits both alike.
"""

from __future__ import annotations

import torch

from ablate.bench.harness import interleave
from ablate.bench.step import check_lengths
from ablate.rollout.base import SamplingParams
from ablate.rollout.hf import HFEngine


def bench_prompts(count: int) -> list[str]:
    """Arithmetic prompts of mixed lengths (so left padding is exercised)."""
    return [f"{7 * i % 97}+{13 * i % 1000}=" for i in range(count)]


def bench_case(model, tokenizer, prompts: int, group: int, new_tokens: int, repeats: int):
    """{engine name: seconds per repeat} for one batch shape."""
    from transformers import GenerationConfig

    texts = bench_prompts(prompts)
    engine = HFEngine(model, tokenizer)
    encoded = tokenizer(texts, padding=True, padding_side="left", return_tensors="pt")
    input_ids = encoded["input_ids"].repeat_interleave(group, 0)
    attention = encoded["attention_mask"].repeat_interleave(group, 0)
    # Plain multinomial sampling with no stopping: no top-k default, EOS never ends a row.
    config = GenerationConfig(
        do_sample=True,
        max_new_tokens=new_tokens,
        top_k=0,
        top_p=1.0,
        eos_token_id=None,
        pad_token_id=tokenizer.pad_token_id,
    )

    seeds = iter(range(1, 10**9))

    def ours():
        sampling = SamplingParams(max_new_tokens=new_tokens, seed=next(seeds), ignore_eos=True)
        rollouts = engine.generate(texts, group, sampling)
        check_lengths(rollouts.lengths.tolist(), new_tokens, "ours")
        return rollouts

    def generate():
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids, attention_mask=attention, generation_config=config
            )
        check_lengths([out.shape[1] - input_ids.shape[1]], new_tokens, "generate")
        return out

    return interleave({"ours": ours, "generate": generate}, repeats, warmup=1).seconds
