"""One log-prob contract for every engine (`Rollouts.logprobs`): the sampled token's log-prob
under the distribution it was drawn from, i.e. softmax(logits / T) (T = 1 when greedy), cut to
the top-k tokens and then to the top-p nucleus when those are set, renormalised: vLLM's
"processed_logprobs". Without top-p/top-k it is log_softmax(logits / T), what the trainer's
forward computes; training refuses top-p/top-k, evaluation may use them.

Each engine's log-probs are checked against that distribution recomputed from the model's full
forward: `HFEngine` and `VLLMEngine` on the fake `vllm`, which samples as vLLM's v1 sampler does
and honours temperature, top-k, top-p and the `logprobs_mode`."""

from __future__ import annotations

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.factors.presets import baseline
from ablate.factors.spec import Budget, TrialSpec
from ablate.rollout import vllm as vllm_engine
from ablate.rollout.hf import HFEngine
from ablate.stages.forward import completion_outputs, model_inputs
from ablate.testing import char_tokenizer, tiny_llama

PROMPTS = ["1+2=", "34*5=", "(7-1)/3="]
SETTINGS = {
    "plain": dict(temperature=1.0),
    "temperature": dict(temperature=0.7),
    "top_p": dict(temperature=1.0, top_p=0.7),
    "top_k": dict(temperature=1.3, top_k=3),
    "top_k_top_p": dict(temperature=0.8, top_k=6, top_p=0.8),
}


@pytest.fixture
def model_and_tokenizer():
    """A tiny Llama with a peaked next-token distribution, so that top-p and top-k cut it."""
    tokenizer = char_tokenizer()
    model = tiny_llama(seed=0, tokenizer=tokenizer)
    with torch.no_grad():
        model.model.norm.weight.mul_(12.0)
    return model, tokenizer


def contract_logprobs(model, rollouts, sampling: SamplingParams) -> torch.Tensor:
    """[B, T] log-probs of the sampled tokens under the contract, from the full forward."""
    ids, attn = model_inputs(rollouts)
    with torch.no_grad():
        _, logits = completion_outputs(model, ids, attn, rollouts.prompt_ids.shape[1], False)
    temperature = 1.0 if sampling.greedy else sampling.temperature
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if not sampling.greedy and sampling.top_k > 0:
        kth = probs.topk(sampling.top_k, dim=-1).values[..., -1:]
        probs = torch.where(probs >= kth, probs, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    if not sampling.greedy and sampling.top_p < 1:
        ordered, order = probs.sort(dim=-1, descending=True)
        before = ordered.cumsum(-1) - ordered  # the mass of the tokens above each one
        kept = torch.zeros_like(probs).scatter(-1, order, (before < sampling.top_p).float())
        probs = probs * kept / (probs * kept).sum(-1, keepdim=True)
    token = rollouts.completion_ids[..., None]
    return probs.gather(-1, token).squeeze(-1).log()


def sample(engine_name: str, model, tokenizer, sampling: SamplingParams, n: int = 4):
    if engine_name == "hf":
        engine = HFEngine(model, tokenizer)
    else:
        engine = vllm_engine.VLLMEngine(model, tokenizer)
    return engine.generate(PROMPTS, n, sampling)


@pytest.mark.parametrize("engine_name", ["hf", "vllm"])
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_each_engines_logprobs_are_those_of_the_distribution_it_sampled(
    fake_vllm, model_and_tokenizer, engine_name, setting
):
    model, tokenizer = model_and_tokenizer
    sampling = SamplingParams(max_new_tokens=10, seed=3, **SETTINGS[setting])
    rollouts = sample(engine_name, model, tokenizer, sampling)
    valid = rollouts.completion_mask > 0
    expected = contract_logprobs(model, rollouts, sampling)[valid]
    got = rollouts.logprobs[valid]
    gap = float((got - expected).abs().max())
    assert gap < 1e-4, f"{engine_name}, {setting}: max |engine - contract| log-prob {gap:.2e}"
    if sampling.filters_distribution:  # the cut is real: the full distribution's differ
        unfiltered = SamplingParams(max_new_tokens=1, temperature=sampling.temperature)
        full = contract_logprobs(model, rollouts, unfiltered)[valid]
        assert float((full - expected).abs().max()) > 1e-2


@pytest.mark.parametrize("engine_name", ["hf", "vllm"])
def test_greedy_logprobs_are_the_untempered_distributions(
    fake_vllm, model_and_tokenizer, engine_name
):
    model, tokenizer = model_and_tokenizer
    sampling = SamplingParams(max_new_tokens=8, temperature=0.0)
    rollouts = sample(engine_name, model, tokenizer, sampling, n=1)
    valid = rollouts.completion_mask > 0
    expected = contract_logprobs(model, rollouts, sampling)[valid]
    assert float((rollouts.logprobs[valid] - expected).abs().max()) < 1e-4


def test_the_fake_reports_raw_logprobs_when_asked_and_they_break_the_contract(
    monkeypatch, model_and_tokenizer, tmp_path
):
    """vLLM's default mode, "raw_logprobs", is the log-softmax before temperature and top-p: the
    fake honours the mode, so a test sees the mismatch ablate's "processed_logprobs" avoids."""
    from ablate.testing.vllm import FakeVLLM

    fake = FakeVLLM().install(monkeypatch)
    model, tokenizer = model_and_tokenizer
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    ids = tokenizer("1+2=")["input_ids"]
    outputs = {}
    for mode in ("raw_logprobs", "processed_logprobs"):
        llm = fake.LLM(str(tmp_path), logprobs_mode=mode, gpu_memory_utilization=0.3)
        params = fake.SamplingParams(temperature=0.7, top_p=0.8, max_tokens=8, logprobs=0, seed=5)
        (out,) = llm.generate([fake.TokensPrompt(prompt_token_ids=ids)], [params])
        outputs[mode] = out.outputs[0]
    raw, processed = outputs["raw_logprobs"], outputs["processed_logprobs"]
    assert raw.token_ids == processed.token_ids  # same seed, same samples: only the report differs
    gaps = [
        abs(r[t].logprob - p[t].logprob)
        for t, r, p in zip(raw.token_ids, raw.logprobs, processed.logprobs, strict=True)
    ]
    assert max(gaps) > 1e-2


@pytest.mark.parametrize("budget", [Budget(top_p=0.9), Budget(top_k=4)], ids=["top_p", "top_k"])
@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_training_refuses_top_p_and_top_k_before_any_compute(budget, engine):
    with pytest.raises(ConfigError) as info:
        TrialSpec(algorithm=baseline("grpo"), model="m", engine=engine, budget=budget)
    (problem,) = str(info.value).splitlines()[1:]
    assert "evaluation only" in problem and "top_p=1, top_k=0" in problem


def test_evaluation_may_still_sample_with_top_p_and_top_k(fake_vllm, model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    sampling = SamplingParams(max_new_tokens=6, top_p=0.5, top_k=3, seed=1)
    for name in ("hf", "vllm"):
        rollouts = sample(name, model, tokenizer, sampling, n=2)
        assert rollouts.num_samples == 6 and not rollouts.logprobs_exact
