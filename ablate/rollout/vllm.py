"""`VLLMEngine`: the `RolloutEngine` protocol on vLLM (GPU only, optional extra `ablate[vllm]`).

vLLM is imported here and nowhere else, and only when an engine is built. What ablate passes to
vLLM, and why (checked against vLLM's source; README, "GPU"):
- `dtype` is the trainer's model's (fp32 stays fp32: vLLM's "auto" would run an fp32 config in
  16 bits); in fp32 the attention is IEEE fp32, not TF32: `TRITON_F32_DEFAULT=ieee`, read by
  Triton's `tl.dot`, which vLLM's Triton attention backend (the fp32 one) computes with.
- `logprobs_mode="processed_logprobs"`: log-probs after temperature (and top-p/top-k), i.e.
  log_softmax(logits / T), ablate's contract; vLLM's default is the raw logits' log-softmax.
- one engine per process, in the trainer's process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, set,
  not defaulted): later trials reuse it through `sync_weights`; `close()` (also run at exit)
  shuts it down, since an in-process engine does not free its GPU memory when dropped.
- one request per sample (n=1), each with its own seed from `sample_seeds`: vLLM seeds the
  children of an n-sample request `seed + j`, so prompt seeds `base + i` would collide.
- sampling vLLM refuses or silently changes is refused first (`SamplingParams.vllm_problems`).
vLLM reports no per-token entropy: `Rollouts.entropy` is None and no `entropy/` metric is logged.
Log-probs come from vLLM's kernels, so `logprobs_exact` is False and the trainer recomputes the
old log-probs itself.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ablate.base.errors import ConfigError
from ablate.base.records import Rollouts, SamplingParams
from ablate.base.seeding import derive_seed
from ablate.rollout.base import checked_request

#: The oldest vLLM the `vllm` extra admits: the first release that supports transformers 5
#: (vllm-project/vllm PR #30566, released in 0.19.1; 0.19.0 still required transformers < 5),
#: without which vLLM cannot load the zoo's tokenizer next to ablate's transformers.
MIN_VLLM = "0.19.1"
#: Set (not defaulted) before the engine is built: the in-process engine core.
IN_PROCESS_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
#: fp32 attention in IEEE fp32: Triton's default for fp32 `tl.dot` is TF32 (10-bit mantissa).
FP32_ATTENTION_ENV = {"TRITON_F32_DEFAULT": "ieee"}
LOGPROBS_MODE = "processed_logprobs"
#: Seeds stay below 2**31: every seed vLLM has accepted across versions fits an int32.
SEED_SPACE = 2**31
_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def engine_dtype(model) -> str:
    """vLLM's `dtype` for `model`: its parameters' (fp32 stays fp32)."""
    dtype = next(model.parameters()).dtype
    if dtype not in _DTYPES:
        raise ConfigError(f"the vllm engine runs float32, bfloat16 or float16 models, not {dtype}")
    return _DTYPES[dtype]


def attention_precision(dtype: str) -> str:
    """The precision vLLM's attention computes in for a model of `dtype` (stated in reports)."""
    if dtype == "float32":
        return "fp32, IEEE (TRITON_F32_DEFAULT=ieee: no TF32)"
    return f"{dtype} inputs, fp32 accumulation"


def sample_seeds(seed: int, count: int) -> list[int]:
    """One vLLM seed per sample of a request, all distinct: consecutive values from a base
    derived from `seed`, taken modulo SEED_SPACE, so any `count` <= SEED_SPACE never repeats."""
    if count > SEED_SPACE:
        raise ConfigError(f"a request of {count} samples needs more than {SEED_SPACE} seeds")
    base = derive_seed(seed, "vllm", "samples") % SEED_SPACE
    return [(base + k) % SEED_SPACE for k in range(count)]


def llm_arguments(
    folder: str, dtype: str, gpu_memory_utilization: float, max_model_len: int | None
) -> dict[str, Any]:
    """The keyword arguments of `vllm.LLM(...)`."""
    return {
        "model": folder,
        "dtype": dtype,
        "logprobs_mode": LOGPROBS_MODE,
        "gpu_memory_utilization": gpu_memory_utilization,
        "max_model_len": max_model_len,
        "enforce_eager": True,  # tiny models: CUDA-graph capture costs more than it saves
        "enable_prefix_caching": False,  # weights change every step; stale prefixes would lie
    }


def _version(text: str):
    from packaging.version import InvalidVersion, Version  # a dependency of transformers

    try:
        return Version(text)
    except InvalidVersion:
        return None


def _import_vllm():
    if not torch.cuda.is_available():
        raise ConfigError("the vllm rollout engine needs a CUDA GPU; use --engine hf on the CPU")
    try:
        import vllm
    except ImportError:
        raise ConfigError(
            f"the vllm rollout engine needs vLLM >= {MIN_VLLM}: pip install 'ablate[vllm]' (GPU)"
        ) from None
    found = _version(str(getattr(vllm, "__version__", "")))
    if found is None or found < _version(MIN_VLLM):
        raise ConfigError(
            f"vLLM {getattr(vllm, '__version__', '?')} is older than {MIN_VLLM}, the first "
            "release that loads tokenizers with transformers 5: pip install 'ablate[vllm]'"
        )
    return vllm


@dataclass
class _Shared:
    """The process's one vLLM engine, the folder it loaded from and what it was built for."""

    llm: Any
    folder: tempfile.TemporaryDirectory
    key: str


_SHARED: _Shared | None = None
_EXIT_HOOK = False


def close() -> None:
    """Shut the process's vLLM engine down and free its GPU memory (also run at exit)."""
    global _SHARED
    shared, _SHARED = _SHARED, None
    if shared is None:
        return
    shared.llm.llm_engine.engine_core.shutdown()
    try:  # the in-process engine's torch.distributed group and model-parallel state
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    except ImportError:
        pass
    else:
        cleanup_dist_env_and_memory()
    shared.folder.cleanup()
    del shared
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _engine_key(model, tokenizer, arguments: dict[str, Any]) -> str:
    """What an engine is built for: the architecture, tokenizer and engine settings (not the
    weights, which `sync_weights` replaces)."""
    config = {k: v for k, v in model.config.to_dict().items() if not k.startswith("_")}
    settings = {k: v for k, v in arguments.items() if k != "model"}
    return json.dumps([config, sorted(tokenizer.get_vocab().items()), settings], default=str)


def _acquire(vllm, model, tokenizer, settings: dict[str, Any]) -> tuple[Any, bool]:
    """(the process's engine for `model`, whether it was reused): built once, reused while the
    architecture and settings match, else closed and rebuilt (never two engines at once)."""
    global _SHARED, _EXIT_HOOK
    key = _engine_key(model, tokenizer, settings)
    if _SHARED is not None and _SHARED.key == key:
        return _SHARED.llm, True
    close()
    os.environ.update(IN_PROCESS_ENV)
    if settings["dtype"] == "float32":
        os.environ.update(FP32_ATTENTION_ENV)
    folder = tempfile.TemporaryDirectory(prefix="ablate-vllm-")
    model.save_pretrained(folder.name)
    tokenizer.save_pretrained(folder.name)
    llm = vllm.LLM(**{**settings, "model": folder.name})
    _SHARED = _Shared(llm, folder, key)
    if not _EXIT_HOOK:
        atexit.register(close)
        _EXIT_HOOK = True
    return llm, False


class VLLMEngine:
    """vLLM sampling from a copy of `model`; call `sync_weights(model)` after every update.
    Engines built in one process share its one vLLM engine (`close()` ends it)."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int | None = None,
        dtype: str | None = None,
    ) -> None:
        """`dtype`: vLLM's, when not the model's own (a bf16-autocast trial samples in bf16)."""
        if dtype is not None and dtype not in _DTYPES.values():
            raise ConfigError(f"dtype={dtype!r} must be one of {sorted(_DTYPES.values())}")
        vllm = _import_vllm()
        self._vllm = vllm
        self.tokenizer = tokenizer
        self.eos_id = int(tokenizer.eos_token_id)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_id
        self.dtype = dtype or engine_dtype(model)
        self.attention_precision = attention_precision(self.dtype)
        self.max_model_len = max_model_len
        settings = llm_arguments("", self.dtype, gpu_memory_utilization, max_model_len)
        self.llm, reused = _acquire(vllm, model, tokenizer, settings)
        if reused:  # the engine holds the previous trial's weights
            self.sync_weights(model)

    def sync_weights(self, model) -> None:
        """Copy the trainer's current weights into vLLM's model."""
        state = {name: tensor.detach() for name, tensor in model.state_dict().items()}
        self.llm.apply_model(lambda vllm_model: vllm_model.load_weights(state.items()))

    def close(self) -> None:
        """Shut the process's vLLM engine down (a later engine builds a new one)."""
        close()

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts:
        prompts, ids_per_prompt = checked_request(prompts, n, problem_ids)
        if problems := sampling.vllm_problems(n):
            raise ConfigError("sampling settings vLLM cannot honour: " + "; ".join(problems))
        encoded = self.tokenizer(prompts, add_special_tokens=True)["input_ids"]
        self._check_lengths(encoded, sampling.max_new_tokens)
        seeds = iter(sample_seeds(sampling.seed, len(prompts) * n))
        requests, params = [], []
        for ids in encoded:
            for _ in range(n):
                requests.append(self._vllm.TokensPrompt(prompt_token_ids=list(ids)))
                params.append(self._params(sampling, next(seeds)))
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        samples = [output.outputs[0] for output in outputs]
        return self._rollouts(encoded, samples, prompts, ids_per_prompt, n)

    def _check_lengths(self, encoded, max_new_tokens: int) -> None:
        longest = max((len(ids) for ids in encoded), default=0)
        if self.max_model_len is not None and longest + max_new_tokens > self.max_model_len:
            raise ConfigError(
                f"a {longest}-token prompt plus max_new_tokens={max_new_tokens} exceeds the "
                f"vllm engine's max_model_len={self.max_model_len}"
            )

    def _params(self, sampling: SamplingParams, seed: int):
        return self._vllm.SamplingParams(
            n=1,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,  # 0 = off, as in ablate
            max_tokens=sampling.max_new_tokens,
            stop=list(sampling.stop),
            include_stop_str_in_output=True,
            ignore_eos=sampling.ignore_eos,
            logprobs=0,  # the sampled token's log-prob only
            seed=seed,
        )

    def _rollouts(self, encoded, samples, prompts, problem_ids, n) -> Rollouts:
        batch = len(samples)
        width_p = max(len(ids) for ids in encoded)
        width_c = max((len(s.token_ids) for s in samples), default=0)
        prompt_ids = torch.full((batch, width_p), self.pad_id, dtype=torch.long)
        prompt_mask = torch.zeros((batch, width_p), dtype=torch.long)
        completion_ids = torch.full((batch, width_c), self.pad_id, dtype=torch.long)
        logprobs = torch.zeros((batch, width_c))
        for b, sample in enumerate(samples):
            prompt = encoded[b // n]
            prompt_ids[b, width_p - len(prompt) :] = torch.tensor(prompt)
            prompt_mask[b, width_p - len(prompt) :] = 1
            tokens = list(sample.token_ids)
            completion_ids[b, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            for t, (token, entry) in enumerate(zip(tokens, sample.logprobs or [], strict=False)):
                logprobs[b, t] = entry[token].logprob
        lengths = torch.tensor([len(s.token_ids) for s in samples], dtype=torch.long)
        mask = (torch.arange(width_c)[None, :] < lengths[:, None]).float()
        return Rollouts(
            prompt_ids=prompt_ids,
            prompt_mask=prompt_mask,
            completion_ids=completion_ids,
            completion_mask=mask,
            logprobs=logprobs * mask,
            entropy=None,  # vLLM reports none: declared absent, never NaN
            lengths=lengths,
            truncated=torch.tensor([s.finish_reason == "length" for s in samples]),
            group_ids=torch.arange(len(prompts)).repeat_interleave(n),
            problem_ids=[pid for pid in problem_ids for _ in range(n)],
            prompts=[p for p in prompts for _ in range(n)],
            texts=[s.text for s in samples],
            logprobs_exact=False,
            pad_id=self.pad_id,
        )
