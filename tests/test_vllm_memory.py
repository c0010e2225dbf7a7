"""The vLLM engine's GPU memory, checked on the CPU. The fake `vllm` (`ablate.testing.vllm`)
accounts for what an engine holds (weights and KV cache: `gpu_memory_utilization` of its device;
the world group's buffers) and gives a block back only when nothing references it, and to the
device only at `torch.cuda.empty_cache()`; vLLM's own shutdown frees nothing (vllm-project/vllm
#21073). `close()` must return every byte while an engine is still held (by a trainer, a report,
an old `VLLMEngine`), and rebuilding engines in one process must not accumulate memory."""

from __future__ import annotations

import gc

import pytest

from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.rollout import vllm as vllm_engine
from ablate.testing import char_tokenizer, tiny_llama
from ablate.testing.vllm import WORLD_GROUP_BYTES, FakeVLLM

UTILIZATION = 0.3  # the engine's default gpu_memory_utilization


def one_engine(fake: FakeVLLM) -> int:
    """Bytes one engine and the process's distributed state hold on the fake device."""
    return int(UTILIZATION * fake.cuda.total) + WORLD_GROUP_BYTES


def test_close_returns_every_byte_while_the_engine_is_still_held(fake_vllm):
    tokenizer = char_tokenizer()
    engine = vllm_engine.VLLMEngine(tiny_llama(seed=0, tokenizer=tokenizer), tokenizer)
    assert fake_vllm.cuda.memory_reserved() == one_engine(fake_vllm)
    engine.close()  # `engine` itself stays referenced here, as a trainer's or a report's would
    assert fake_vllm.cuda.memory_reserved() == 0, "bytes still reserved after close()"
    assert fake_vllm.calls.shutdowns == 1
    state = fake_vllm.parallel_state
    assert state._WORLD is None and state._TP is None and state._PP is None


def test_rebuilds_in_one_process_do_not_accumulate_memory(fake_vllm):
    tokenizer = char_tokenizer()
    held = []  # every engine kept, as the trials and reports of one process keep theirs
    for k, size in enumerate(["0.53M", "4.2M"] * 3):  # another architecture: closed and rebuilt
        model = tiny_llama(seed=k, size=size, tokenizer=tokenizer)
        held.append(vllm_engine.VLLMEngine(model, tokenizer))
        reserved = fake_vllm.cuda.memory_reserved()
        assert reserved == one_engine(fake_vllm), f"build {k + 1}: {reserved} bytes reserved"
    assert len(fake_vllm.calls.llm_kwargs) == 6
    vllm_engine.close()
    assert fake_vllm.cuda.memory_reserved() == 0


def test_a_closed_engine_refuses_to_sample_or_sync(fake_vllm):
    tokenizer = char_tokenizer()
    model = tiny_llama(seed=0, tokenizer=tokenizer)
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    engine.close()
    with pytest.raises(ConfigError, match="closed"):
        engine.generate(["1+1="], 2, SamplingParams(max_new_tokens=3))
    with pytest.raises(ConfigError, match="closed"):
        engine.sync_weights(model)
    again = vllm_engine.VLLMEngine(model, tokenizer)  # a new engine builds a new vLLM engine
    assert again.generate(["1+1="], 2, SamplingParams(max_new_tokens=3)).num_samples == 2


def test_the_fake_frees_only_what_nothing_holds(monkeypatch, tmp_path):
    """The fake's model of vLLM's memory, on its own: shutdown frees nothing, a held `LLM`
    keeps everything, garbage goes to the allocator's cache, empty_cache to the device."""
    fake = FakeVLLM().install(monkeypatch)
    tokenizer = char_tokenizer()
    tiny_llama(seed=0, tokenizer=tokenizer).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    llm = fake.LLM(str(tmp_path), gpu_memory_utilization=UTILIZATION)
    held = fake.cuda.memory_allocated()
    llm.llm_engine.engine_core.shutdown()
    assert fake.cuda.memory_allocated() == held  # vllm-project/vllm #21073
    del llm
    gc.collect()  # the worker <-> executor cycle needs the collector
    assert fake.cuda.memory_allocated() == WORLD_GROUP_BYTES  # the world group is still up
    assert fake.cuda.memory_reserved() == held  # cached by the allocator, not yet returned
    fake.parallel_state.cleanup_dist_env_and_memory()
    assert fake.cuda.memory_reserved() == 0


def test_the_fake_refuses_a_build_the_device_has_no_room_for(monkeypatch, tmp_path):
    fake = FakeVLLM().install(monkeypatch)
    tokenizer = char_tokenizer()
    tiny_llama(seed=0, tokenizer=tokenizer).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    kept = [fake.LLM(str(tmp_path), gpu_memory_utilization=UTILIZATION) for _ in range(3)]
    with pytest.raises(ValueError, match="Free memory on device"):
        fake.LLM(str(tmp_path), gpu_memory_utilization=UTILIZATION)
    assert len(kept) == 3
    fake.parallel_state.cleanup_dist_env_and_memory()


def test_close_releases_the_memory_even_when_vllms_shutdown_raises(fake_vllm, monkeypatch):
    tokenizer = char_tokenizer()
    engine = vllm_engine.VLLMEngine(tiny_llama(seed=0, tokenizer=tokenizer), tokenizer)

    def dead():
        raise RuntimeError("engine core died")

    monkeypatch.setattr(engine.llm.llm_engine.engine_core, "shutdown", dead)
    with pytest.raises(RuntimeError, match="engine core died"):
        vllm_engine.close()
    assert fake_vllm.cuda.memory_reserved() == 0 and vllm_engine._SHARED is None
