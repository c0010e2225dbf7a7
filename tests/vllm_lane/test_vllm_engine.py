"""`VLLMEngine` against the real engine (vLLM's CPU build, `make test-vllm`): its settings, the
log-prob contract, weight sync, seeds, stop strings / EOS / truncation, close(), and what vLLM
itself refuses or changes (what `SamplingParams.vllm_problems` refuses first)."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch

from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.models import load_model
from ablate.rollout import vllm as vllm_engine
from ablate.rollout.vllm_settings import (
    LOGPROB_TOL,
    cpu_kv_cache_bytes,
    ram_bytes,
    sample_seeds,
)
from ablate.testing import char_tokenizer, tiny_llama
from ablate.testing.engine_checks import logprob_gap, perturb_every_tensor, stream_check
from tests.vllm_lane.conftest import rss_mib

pytestmark = pytest.mark.vllm

PROMPTS = [f"Q: {a} + {b} =" for a, b in ((12, 7), (3, 45), (60, 8), (9, 9))]


def test_the_engine_builds_on_every_zoo_rung_with_the_projects_cpu_settings(vllm_module):
    """One engine for the four ladder rungs (one architecture), each rung's weights synced in
    when the engine is reused, with the settings `vllm_settings` states for the CPU."""
    engine = None
    for rung in ("hopeless", "mid", "rl_ready", "saturated"):
        model, tokenizer = load_model(rung)
        engine = vllm_engine.VLLMEngine(model, tokenizer)
        rollouts = engine.generate(PROMPTS, 2, SamplingParams(max_new_tokens=12, seed=1))
        assert logprob_gap(model, rollouts, 1.0) <= LOGPROB_TOL, rung
    config = engine.llm.llm_engine.vllm_config
    assert engine.platform == "cpu" and config.device_config.device.type == "cpu"
    assert config.model_config.dtype == torch.float32  # fp32 stays fp32
    assert config.model_config.logprobs_mode == "processed_logprobs"
    assert config.cache_config.enable_prefix_caching is False
    assert config.cache_config.kv_cache_memory_bytes == cpu_kv_cache_bytes(
        model.config, "float32", None, ram_bytes()
    )
    assert config.scheduler_config.enable_chunked_prefill is False
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"  # in the trainer's process


def test_building_leaves_the_processs_threads_and_random_generators_as_they_were(vllm_module):
    vllm_engine.close()
    model, tokenizer = load_model("rl_ready")  # (loading draws from torch's generator)
    torch.set_num_threads(2)
    random.seed(11)
    np.random.seed(11)
    torch.manual_seed(11)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(11)
    np.random.seed(11)
    torch.manual_seed(11)
    vllm_engine.VLLMEngine(model, tokenizer)  # vLLM reseeds all three with its seed 0
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
    assert torch.get_num_threads() == 2  # vLLM serves with 1
    torch.set_num_threads(1)  # vLLM's CPU worker had made this a no-op for the process
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("size", ["zoo", "4.2M"])
def test_each_sampled_tokens_logprob_is_the_trainers_log_softmax(vllm_module, size, temperature):
    """The contract of `Rollouts.logprobs`: the processed log-prob vLLM returns for each sampled
    token equals log_softmax(logits / T) of the trainer's forward at its position."""
    if size == "zoo":
        model, tokenizer = load_model("rl_ready")
    else:
        tokenizer = char_tokenizer()
        model = tiny_llama(seed=0, size=size, tokenizer=tokenizer)
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    sampling = SamplingParams(max_new_tokens=24, temperature=temperature, seed=5)
    rollouts = engine.generate(PROMPTS, 8, sampling)
    assert rollouts.entropy is None and not rollouts.logprobs_exact
    assert logprob_gap(model, rollouts, temperature) <= LOGPROB_TOL
    assert (rollouts.logprobs[rollouts.completion_mask == 0] == 0).all()


def test_with_top_k_the_logprobs_are_of_the_filtered_distribution(vllm_module, zoo_model):
    """processed_logprobs: after top-k, renormalised (as HFEngine's), not the raw logits'."""
    model, tokenizer = zoo_model
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    rollouts = engine.generate(PROMPTS, 8, SamplingParams(max_new_tokens=16, top_k=3, seed=2))
    assert logprob_gap(model, rollouts, 1.0, top_k=3) <= LOGPROB_TOL
    assert logprob_gap(model, rollouts, 1.0) > 1e-3  # the unfiltered ones differ


def test_after_sync_the_logprobs_are_the_updated_policys_and_a_partial_sync_is_caught(
    vllm_module, zoo_model
):
    model, tokenizer = zoo_model
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    sampling = SamplingParams(max_new_tokens=16, seed=4)
    perturb_every_tensor(model)
    skipped = engine.generate(PROMPTS, 4, sampling)
    assert logprob_gap(model, skipped, 1.0) > 100 * LOGPROB_TOL  # the check sees a skipped sync
    state = model.state_dict()
    for left_out in ("model.norm.weight", "model.layers.1.self_attn.k_proj.weight"):
        partial = [(k, v) for k, v in state.items() if k != left_out]
        engine.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": partial})
        rollouts = engine.generate(PROMPTS, 4, sampling)
        # ... and a partial one (vLLM leaves a fused layer it got only part of uninitialised:
        # its log-probs are then garbage or NaN, which `not <=` counts as a gap)
        assert not logprob_gap(model, rollouts, 1.0) <= 10 * LOGPROB_TOL, left_out
    engine.sync_weights(model)
    assert logprob_gap(model, engine.generate(PROMPTS, 4, sampling), 1.0) <= LOGPROB_TOL


def test_a_sync_logs_no_per_layer_warning_even_after_vllm_reconfigures_its_loggers(
    vllm_module, zoo_model
):
    import logging.config

    model, tokenizer = zoo_model
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    # as the engine's build does in a study's worker: a dictConfig naming `vllm` resets the
    # level of every `vllm.*` logger (the quieting once set a level and was undone by this)
    logging.config.dictConfig(
        {"version": 1, "disable_existing_loggers": False, "loggers": {"vllm": {"level": "DEBUG"}}}
    )
    records: list[logging.LogRecord] = []
    catcher = logging.Handler()
    catcher.emit = records.append
    quiet = logging.getLogger(vllm_engine.QUIET_LOGGER)
    quiet.addHandler(catcher)
    try:
        engine.sync_weights(model)
        quiet.error("a real error still passes")
    finally:
        quiet.removeHandler(catcher)
    assert [r.getMessage() for r in records] == ["a real error still passes"]


def test_every_sample_has_its_own_seeded_stream_and_a_seed_replays(vllm_module):
    """On a random 4.2M model (near-uniform next tokens: equal samples mean equal streams)."""
    tokenizer = char_tokenizer()
    engine = vllm_engine.VLLMEngine(tiny_llama(seed=0, size="4.2M", tokenizer=tokenizer), tokenizer)
    prompts = [f"Q: {i} + {i} =" for i in range(8)]
    sampling = SamplingParams(max_new_tokens=12, seed=3, ignore_eos=True)
    streams = stream_check(engine, prompts, 8, sampling)
    assert (streams.distinct, streams.samples) == (64, 64)
    assert streams.replays and streams.other_seed_differs
    # what vLLM does with one n-sample request (children seeded seed + j, vllm/v1/engine/
    # parallel_sampling.py), which is why each sample is its own request: seed s's child 1 is
    # seed s + 1's child 0
    vllm = vllm_module
    ids = engine.tokenizer(prompts[0])["input_ids"]
    request = [vllm.TokensPrompt(prompt_token_ids=ids)]
    seed = sample_seeds(3, 1)[0]

    def tokens(seed, n):
        params = vllm.SamplingParams(n=n, seed=seed, max_tokens=12, ignore_eos=True)
        (output,) = engine.llm.generate(request, params, use_tqdm=False)
        return [list(sample.token_ids) for sample in output.outputs]

    assert tokens(seed, 2)[1] == tokens(seed + 1, 1)[0]


def test_a_step_of_more_prompt_tokens_than_one_scheduler_step_samples_and_replays(vllm_module):
    """512 seeded samples of ~12-token prompts (the quickstart's eval): over vLLM's 4096-token
    step, where a chunked prefill rewinds a CPU generator vLLM cannot rewind."""
    tokenizer = char_tokenizer()
    engine = vllm_engine.VLLMEngine(tiny_llama(seed=0, size="4.2M", tokenizer=tokenizer), tokenizer)
    prompts = [f"Q: {i} + {i % 7} =" for i in range(256)]
    sampling = SamplingParams(max_new_tokens=6, seed=8, ignore_eos=True)
    first = engine.generate(prompts, 2, sampling)
    assert int(first.prompt_mask.sum()) > 4096 and first.num_samples == 512
    assert torch.equal(first.completion_ids, engine.generate(prompts, 2, sampling).completion_ids)


def test_stop_strings_eos_and_truncation_as_hfengine_reports_them(vllm_module, zoo_model):
    model, tokenizer = zoo_model
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    stopped = engine.generate(PROMPTS, 8, SamplingParams(max_new_tokens=40, stop=("####",), seed=6))
    hits = [b for b, text in enumerate(stopped.texts) if "####" in text]
    assert hits, "the zoo model writes its answer marker"
    for b in hits:
        assert stopped.texts[b].endswith("####") and not stopped.truncated[b]
        assert stopped.lengths[b] < 40
    ended = engine.generate(PROMPTS, 8, SamplingParams(max_new_tokens=48, seed=6))
    eos = engine.eos_id
    by_eos = [b for b in range(ended.num_samples) if not ended.truncated[b]]
    assert by_eos, "the zoo model ends its answers"
    for b in by_eos:  # the EOS token is the last masked token; the text does not show it
        last = int(ended.lengths[b]) - 1
        assert ended.completion_ids[b, last] == eos and ended.completion_mask[b, last] == 1
        assert tokenizer.eos_token not in ended.texts[b]
    cut = engine.generate(PROMPTS, 2, SamplingParams(max_new_tokens=3, ignore_eos=True, seed=6))
    assert (cut.lengths == 3).all() and cut.truncated.all()


def test_close_returns_the_engines_memory_and_a_second_engine_builds(vllm_module):
    tokenizer = char_tokenizer()
    model = tiny_llama(seed=0, size="4.2M", tokenizer=tokenizer)
    cache_mib = cpu_kv_cache_bytes(model.config, "float32", None, ram_bytes()) / 2**20
    sampling = SamplingParams(max_new_tokens=8, seed=0)
    vllm_engine.close()
    before = rss_mib()
    kept = vllm_engine.VLLMEngine(model, tokenizer)  # held, as a trainer or a report may
    kept.generate(PROMPTS, 2, sampling)
    held = rss_mib()
    assert held - before >= 0.8 * cache_mib  # the cache is resident memory
    vllm_engine.close()
    closed = rss_mib()
    assert held - closed >= 0.8 * cache_mib
    with pytest.raises(ConfigError, match="closed"):
        kept.generate(PROMPTS, 1, sampling)
    for _ in range(2):  # engines built and closed again in the same process hold nothing more
        second = vllm_engine.VLLMEngine(model, tokenizer)
        second.generate(PROMPTS, 2, sampling)
        vllm_engine.close()
    assert rss_mib() - closed <= 0.25 * cache_mib


def test_what_vllm_refuses_or_changes_is_what_ablate_refuses_first(vllm_module, tmp_path):
    """The real engine's rules behind `SamplingParams.vllm_problems` and the keyword checks."""
    vllm = vllm_module
    with pytest.raises(TypeError, match="temprature"):
        vllm.SamplingParams(temprature=0.5)
    with pytest.raises(Exception, match="temperature"):
        vllm.SamplingParams(temperature=2.5)
    with pytest.raises(Exception, match="n must be 1"):
        vllm.SamplingParams(temperature=0.0, n=2)
    assert vllm.SamplingParams(temperature=0.005).temperature == 0.01  # raised, silently
    with pytest.raises(TypeError, match="logprob_mode"):
        vllm.LLM(str(tmp_path), logprob_mode="processed_logprobs")
    engine = vllm_engine.VLLMEngine(*load_model("rl_ready"))
    for temperature, n in ((2.5, 2), (0.005, 2), (0.0, 4)):
        with pytest.raises(ConfigError):
            engine.generate(PROMPTS, n, SamplingParams(max_new_tokens=4, temperature=temperature))
    greedy = engine.generate(PROMPTS, 1, SamplingParams(max_new_tokens=6, temperature=0.0))
    assert greedy.num_samples == len(PROMPTS)


def test_close_releases_the_engine_even_when_vllms_shutdown_raises(vllm_module, monkeypatch):
    tokenizer = char_tokenizer()
    model = tiny_llama(seed=0, size="4.2M", tokenizer=tokenizer)
    cache_mib = cpu_kv_cache_bytes(model.config, "float32", None, ram_bytes()) / 2**20
    engine = vllm_engine.VLLMEngine(model, tokenizer)
    engine.generate(PROMPTS, 1, SamplingParams(max_new_tokens=4, seed=0))
    held = rss_mib()

    def dead(self):
        raise RuntimeError("engine core died")

    core = engine.llm.llm_engine.engine_core.engine_core  # the EngineCore: its class patched,
    monkeypatch.setattr(type(core), "shutdown", dead)  # so the test itself holds no instance
    del core
    with pytest.raises(RuntimeError, match="engine core died"):
        vllm_engine.close()
    assert vllm_engine._SHARED is None
    assert held - rss_mib() >= 0.8 * cache_mib
    engine = vllm_engine.VLLMEngine(model, tokenizer)  # and the next one builds
    assert engine.generate(PROMPTS, 1, SamplingParams(max_new_tokens=4, seed=0)).num_samples == 4
