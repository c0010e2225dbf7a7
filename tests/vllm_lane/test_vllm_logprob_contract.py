"""The one log-prob contract (tests/test_logprob_contract.py) on the real engine: vLLM's
processed log-probs are those of the distribution each token was sampled from, under every
sampling setting, greedy included; vLLM's default mode (raw) is not, which is why ablate asks
for the processed ones."""

from __future__ import annotations

import pytest

from ablate.base.records import SamplingParams
from ablate.rollout import vllm as vllm_engine
from ablate.rollout import vllm_settings
from tests.test_logprob_contract import (
    SETTINGS,
    contract_gap,
    contract_logprobs,
    greedy_gap,
    peaked_model_and_tokenizer,
    sample,
)

pytestmark = pytest.mark.vllm


@pytest.fixture
def model_and_tokenizer():
    """The main lane's peaked tiny Llama (tests/test_logprob_contract.py)."""
    return peaked_model_and_tokenizer()


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_vllms_logprobs_are_those_of_the_distribution_it_sampled(
    vllm_module, model_and_tokenizer, setting
):
    gap = contract_gap("vllm", *model_and_tokenizer, setting)
    assert gap < vllm_settings.LOGPROB_TOL, f"{setting}: max |vLLM - contract| log-prob {gap:.2e}"


def test_vllms_greedy_logprobs_are_the_untempered_distributions(vllm_module, model_and_tokenizer):
    assert greedy_gap("vllm", *model_and_tokenizer) < vllm_settings.LOGPROB_TOL


def test_vllms_default_raw_logprobs_would_break_the_contract(
    vllm_module, model_and_tokenizer, monkeypatch
):
    """The same samples reported in vLLM's default mode, "raw_logprobs" (before temperature and
    top-p): the gap ablate's "processed_logprobs" avoids."""
    model, tokenizer = model_and_tokenizer
    sampling = SamplingParams(max_new_tokens=8, temperature=0.7, top_p=0.8, seed=5)
    processed = sample("vllm", model, tokenizer, sampling)
    monkeypatch.setattr(vllm_settings, "LOGPROBS_MODE", "raw_logprobs")  # a rebuilt engine
    raw = sample("vllm", model, tokenizer, sampling)
    vllm_engine.close()
    assert raw.completion_ids.tolist() == processed.completion_ids.tolist()  # only the report
    valid = raw.completion_mask > 0
    expected = contract_logprobs(model, raw, sampling)[valid]
    assert float((raw.logprobs[valid] - expected).abs().max()) > 1e-2
    assert float((processed.logprobs[valid] - expected).abs().max()) < vllm_settings.LOGPROB_TOL
