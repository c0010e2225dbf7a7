"""One log-prob contract for every engine (`Rollouts.logprobs`): the sampled token's log-prob
under the distribution it was drawn from, i.e. softmax(logits / T) (T = 1 when greedy), cut to
the top-k tokens and then to the top-p nucleus when those are set, renormalised: vLLM's
"processed_logprobs". Without top-p/top-k it is log_softmax(logits / T), what the trainer's
forward computes; training refuses top-p/top-k, evaluation may use them.

Each engine's log-probs are checked against that distribution recomputed from the model's full
forward: `HFEngine` here, `VLLMEngine` on the real engine in the vLLM lane
(tests/vllm_lane/test_vllm_logprob_contract.py, which runs these same checks)."""

from __future__ import annotations

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.baselines import baseline
from ablate.factors.spec import Budget, TrialSpec
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
    return peaked_model_and_tokenizer()


def peaked_model_and_tokenizer():
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
        from ablate.rollout.vllm import VLLMEngine  # the vLLM lane only

        engine = VLLMEngine(model, tokenizer)
    return engine.generate(PROMPTS, n, sampling)


def contract_gap(engine_name: str, model, tokenizer, setting: str) -> float:
    """Max |engine - contract| log-prob over the samples of `setting`; also checks that a
    filtering setting really cuts the distribution."""
    sampling = SamplingParams(max_new_tokens=10, seed=3, **SETTINGS[setting])
    rollouts = sample(engine_name, model, tokenizer, sampling)
    valid = rollouts.completion_mask > 0
    expected = contract_logprobs(model, rollouts, sampling)[valid]
    if sampling.filters_distribution:  # the cut is real: the full distribution's differ
        unfiltered = SamplingParams(max_new_tokens=1, temperature=sampling.temperature)
        full = contract_logprobs(model, rollouts, unfiltered)[valid]
        assert float((full - expected).abs().max()) > 1e-2
    return float((rollouts.logprobs[valid] - expected).abs().max())


def greedy_gap(engine_name: str, model, tokenizer) -> float:
    sampling = SamplingParams(max_new_tokens=8, temperature=0.0)
    rollouts = sample(engine_name, model, tokenizer, sampling, n=1)
    valid = rollouts.completion_mask > 0
    expected = contract_logprobs(model, rollouts, sampling)[valid]
    return float((rollouts.logprobs[valid] - expected).abs().max())


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_hfengines_logprobs_are_those_of_the_distribution_it_sampled(model_and_tokenizer, setting):
    gap = contract_gap("hf", *model_and_tokenizer, setting)
    assert gap < 1e-4, f"{setting}: max |engine - contract| log-prob {gap:.2e}"


def test_hfengines_greedy_logprobs_are_the_untempered_distributions(model_and_tokenizer):
    assert greedy_gap("hf", *model_and_tokenizer) < 1e-4


@pytest.mark.parametrize("budget", [Budget(top_p=0.9), Budget(top_k=4)], ids=["top_p", "top_k"])
@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_training_refuses_top_p_and_top_k_before_any_compute(budget, engine):
    with pytest.raises(ConfigError) as info:
        TrialSpec(algorithm=baseline("grpo"), model="m", engine=engine, budget=budget)
    (problem,) = str(info.value).splitlines()[1:]
    assert "evaluation only" in problem and "top_p=1, top_k=0" in problem


def test_evaluation_may_still_sample_with_top_p_and_top_k(model_and_tokenizer):
    sampling = SamplingParams(max_new_tokens=6, top_p=0.5, top_k=3, seed=1)
    rollouts = sample("hf", *model_and_tokenizer, sampling, n=2)
    assert rollouts.num_samples == 6 and not rollouts.logprobs_exact
