"""Rollout throughput: `HFEngine` (tokens + log-probs + entropy) against `model.generate`
(tokens only) on tiny random Llama models at training batch shapes.

Both sample exactly `new_tokens` tokens per sequence (EOS ignored), and runs are interleaved
A B A B so that load on a shared machine hits both alike; we report the median and the min/max
tokens/s over repeats, and the ratio of medians.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ablate.rollout.base import SamplingParams
from ablate.rollout.hf import HFEngine
from ablate.testing import TINY_CONFIGS, char_tokenizer, tiny_llama

SHAPES = ((8, 8), (32, 8))  # (prompts, samples per prompt)


@dataclass(frozen=True)
class Timing:
    config: str
    prompts: int
    group: int
    new_tokens: int
    engine: str
    seconds: list[float]

    @property
    def tokens(self) -> int:
        return self.prompts * self.group * self.new_tokens

    def row(self, baseline: Timing | None) -> dict[str, object]:
        rates = [self.tokens / s for s in self.seconds]
        median = statistics.median(rates)
        ratio = median / statistics.median(baseline.tokens / s for s in baseline.seconds)
        return {
            "config": self.config,
            "shape": f"{self.prompts}x{self.group}",
            "new_tokens": self.new_tokens,
            "engine": self.engine,
            "median_tok_s": round(median, 1),
            "min_tok_s": round(min(rates), 1),
            "max_tok_s": round(max(rates), 1),
            "median_s": round(statistics.median(self.seconds), 4),
            "repeats": len(self.seconds),
            "ratio_vs_generate": round(ratio, 3) if baseline else None,
        }


def bench_prompts(count: int) -> list[str]:
    """Arithmetic prompts of mixed lengths (so left padding is exercised)."""
    return [f"{7 * i % 97}+{13 * i % 1000}=" for i in range(count)]


def _interleaved(runners: dict[str, Callable[[int], object]], repeats: int) -> dict[str, list]:
    for run in runners.values():  # warm-up: allocator, kernels, lazy imports
        run(-1)
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    for repeat in range(repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            run(repeat)
            seconds[name].append(time.perf_counter() - start)
    return seconds


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

    def ours(repeat: int):
        sampling = SamplingParams(max_new_tokens=new_tokens, seed=repeat + 1, ignore_eos=True)
        return engine.generate(texts, group, sampling)

    def generate(repeat: int):
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids, attention_mask=attention, generation_config=config
            )
        assert out.shape[1] == input_ids.shape[1] + new_tokens, "generate stopped early"
        return out

    return _interleaved({"ours": ours, "generate": generate}, repeats)


def bench_rollout(
    *,
    configs: Sequence[str] = tuple(TINY_CONFIGS),
    shapes: Sequence[tuple[int, int]] = SHAPES,
    new_tokens: int = 32,
    repeats: int = 5,
    progress: Callable[[str], None] | None = None,
):
    """A pandas DataFrame with one row per (config, shape, engine)."""
    import pandas as pd

    tokenizer = char_tokenizer()
    rows = []
    for config in configs:
        model = tiny_llama(seed=0, tokenizer=tokenizer, size=config)
        for prompts, group in shapes:
            if progress is not None:
                progress(f"{config} {prompts}x{group}")
            seconds = bench_case(model, tokenizer, prompts, group, new_tokens, repeats)
            timings = {
                name: Timing(config, prompts, group, new_tokens, name, values)
                for name, values in seconds.items()
            }
            for timing in timings.values():
                rows.append(timing.row(timings["generate"]))
    return pd.DataFrame(rows)
