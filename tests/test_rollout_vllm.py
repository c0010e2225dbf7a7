"""VLLMEngine: GPU-only tests, plus the one-line error where it cannot run."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.testing import char_tokenizer, tiny_llama

HAVE_VLLM = torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(HAVE_VLLM, reason="checks the error raised without CUDA or vLLM")
def test_without_cuda_or_vllm_construction_is_a_one_line_config_error():
    from ablate.rollout.vllm import VLLMEngine

    with pytest.raises(ConfigError) as info:
        VLLMEngine(tiny_llama(), char_tokenizer())
    assert "\n" not in str(info.value) and "vllm" in str(info.value).lower()


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_VLLM, reason="needs CUDA and vLLM")
def test_vllm_generates_groups_and_follows_weight_updates():
    from ablate.rollout.vllm import VLLMEngine

    tokenizer = char_tokenizer()
    model = tiny_llama(seed=0, tokenizer=tokenizer)
    engine = VLLMEngine(model, tokenizer)
    sampling = SamplingParams(max_new_tokens=8, seed=1, stop=("\n",))
    rollouts = engine.generate(["1+2=", "3+4="], 4, sampling, problem_ids=["a", "b"])
    assert rollouts.num_samples == 8 and rollouts.group_size == 4
    assert not rollouts.logprobs_exact
    assert (rollouts.lengths <= 8).all() and (rollouts.lengths >= 1).all()
    valid = rollouts.completion_mask > 0
    assert (rollouts.logprobs[valid] <= 0).all()
    # Pushing new weights reaches vLLM: a zero final norm makes every logit 0 (uniform).
    with torch.no_grad():
        model.model.norm.weight.zero_()
    engine.sync_weights(model)
    after = engine.generate(["1+2="], 4, sampling)
    uniform = -math.log(model.config.vocab_size)
    valid = after.completion_mask > 0
    assert torch.allclose(after.logprobs[valid], torch.full_like(after.logprobs[valid], uniform))
    engine.close()


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_VLLM, reason="needs CUDA and vLLM")
def test_close_returns_the_gpu_memory_of_every_rebuild():
    """On the device what tests/test_vllm_memory.py checks on the fake: engines kept, rebuilt
    for other architectures, then closed: torch holds no more than before the first build."""
    from ablate.rollout import vllm as vllm_engine

    tokenizer = char_tokenizer()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    kept = []
    for size in ("0.53M", "4.2M", "0.53M"):
        model = tiny_llama(seed=0, size=size, tokenizer=tokenizer).cuda()
        kept.append(vllm_engine.VLLMEngine(model, tokenizer))
        kept[-1].generate(["1+2="], 2, SamplingParams(max_new_tokens=4, seed=0))
        del model
    vllm_engine.close()
    assert torch.cuda.memory_allocated() - before <= 64 * 2**20
