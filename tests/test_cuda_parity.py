"""The trainer on CUDA against its CPU path (devtools.bench.cuda_parity): the fused Llama forward
and a packed update's gradients within the stated tolerances, fp32 and bf16 autocast. The GPU
tests run under `make test-gpu` (and in `make gpu-check`'s CUDA check); on the CPU only the
harness itself is checked."""

from __future__ import annotations

import warnings

import pytest
import torch

from ablate.testing import char_tokenizer, tiny_llama
from devtools.bench import cuda_parity

CUDA = torch.cuda.is_available()


def test_the_harness_finds_no_difference_between_a_device_and_itself():
    model = tiny_llama(seed=2, tokenizer=char_tokenizer())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bf16 autocast asks for CUDA: on the CPU a no-op
        result = cuda_parity.parity(model, "cpu")
    assert result["fp32 logp max abs"] == 0 and result["fp32 grad max rel"] == 0
    assert cuda_parity.parity_passed(result)
    assert next(model.parameters()).device.type == "cpu"  # copies moved, never the model
    worse = {**result, "fp32 logp max abs": 2 * cuda_parity.FP32_LOGP_MAX_ABS}
    assert not cuda_parity.parity_passed(worse)


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("size", ["0.53M", "4.2M"])
def test_fast_llama_and_the_packed_update_on_cuda_match_the_cpu(size):
    from ablate.base.devices import configure_determinism

    configure_determinism("cuda")
    result = cuda_parity.parity(tiny_llama(seed=0, size=size, tokenizer=char_tokenizer()))
    assert result["fp32 logp max abs"] <= cuda_parity.FP32_LOGP_MAX_ABS, result
    assert result["fp32 grad max rel"] <= cuda_parity.FP32_GRAD_REL, result
    assert result["bf16 logp mean abs"] <= cuda_parity.BF16_LOGP_MEAN_ABS, result
    assert result["bf16 logp mean abs"] > 0  # autocast really ran in bf16


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_a_trial_on_auto_puts_policy_reference_and_critic_on_cuda():
    import dataclasses

    from ablate.baselines import baseline
    from ablate.factors.spec import TrialSpec
    from ablate.testing import ScriptedEngine, cycle_script
    from ablate.trial.setup import setup_trial

    tokenizer = char_tokenizer()
    algorithm = dataclasses.replace(baseline("ppo"), kl_coef=0.01)
    trial = TrialSpec(algorithm=algorithm, model="m", device="auto", precision="bf16")
    s = setup_trial(
        trial,
        loaded=(tiny_llama(tokenizer=tokenizer), tokenizer),
        engine=lambda m, t: ScriptedEngine(cycle_script(["1"]), tokenizer=t),
    )
    assert s.device == "cuda" and s.precision == "bf16"
    assert next(s.model.parameters()).device.type == "cuda"
    assert next(s.ref.parameters()).device.type == "cuda"
    assert next(s.model.parameters()).dtype == torch.float32  # autocast, not a cast
    for module in s.estimator.trained_modules().values():
        assert next(module.parameters()).device.type == "cuda"
