"""Rollout throughput: `HFEngine` (tokens + log-probs + entropy) against `model.generate`
(tokens only) at training batch shapes.

Both sample exactly `new_tokens` tokens per sequence (EOS ignored), or in `natural_case` up to
`max_tokens` ending at EOS (the zoo task's prompts; ours also without ragged decoding, which
samples the same), and runs are interleaved A B A B so that load on a shared machine hits all
alike.
"""

from __future__ import annotations

import torch

from ablate.base.records import SamplingParams
from ablate.rollout.hf import HFEngine
from devtools.bench.harness import interleave
from devtools.bench.step import check_lengths


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


def zoo_prompts(count: int) -> tuple[list[str], tuple[str, ...]]:
    """The arithmetic task's first `count` training prompts in the plain template (what the
    natural-length RL steps sample from), and the template's stop strings."""
    from ablate.tasks import get_task
    from ablate.tasks.templates import get_template

    template = get_template("plain")
    problems = get_task("arithmetic").problems("train")[:count]
    return [template.render(p.question) for p in problems], tuple(template.stop)


def generated_lengths(completions: torch.Tensor, eos_id: int) -> list[int]:
    """Tokens each row of `model.generate`'s new tokens holds: up to its first EOS (included),
    else all of them."""
    is_eos = completions == eos_id
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1) + 1, completions.shape[1])
    return first.tolist()


def natural_case(model, tokenizer, prompts: int, group: int, max_tokens: int, repeats: int):
    """({runner: seconds per repeat}, {runner: generated tokens per repeat}) for EOS-ended
    completions of up to `max_tokens` tokens: "ours" (ragged decoding), "ours full batch"
    (finished rows decoded to the end) and "generate". Each repeat uses a fresh seed, the
    same for every runner."""
    from transformers import GenerationConfig

    texts, stop = zoo_prompts(prompts)
    engines = {"ours": HFEngine(model, tokenizer), "ours full batch": HFEngine(model, tokenizer)}
    engines["ours full batch"].ragged = False
    encoded = tokenizer(texts, padding=True, padding_side="left", return_tensors="pt")
    input_ids = encoded["input_ids"].repeat_interleave(group, 0)
    attention = encoded["attention_mask"].repeat_interleave(group, 0)
    config = GenerationConfig(
        do_sample=True,
        max_new_tokens=max_tokens,
        top_k=0,
        top_p=1.0,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    tokens: dict[str, list[int]] = {"ours": [], "ours full batch": [], "generate": []}
    seeds = {name: iter(range(1, 10**9)) for name in tokens}

    def ours(name: str):
        def run():
            sampling = SamplingParams(max_new_tokens=max_tokens, stop=stop, seed=next(seeds[name]))
            rollouts = engines[name].generate(texts, group, sampling)
            tokens[name].append(int(rollouts.lengths.sum()))

        return run

    def generate():
        torch.manual_seed(next(seeds["generate"]))
        with torch.inference_mode():
            out = model.generate(
                input_ids=input_ids, attention_mask=attention, generation_config=config
            )
        lengths = generated_lengths(out[:, input_ids.shape[1] :], tokenizer.eos_token_id)
        tokens["generate"].append(sum(lengths))

    runners = {"ours": ours("ours"), "ours full batch": ours("ours full batch")}
    runs = interleave({**runners, "generate": generate}, repeats, warmup=1)
    return runs.seconds, {name: counts[1:] for name, counts in tokens.items()}
