"""`VLLMEngine`: the `RolloutEngine` protocol on vLLM (GPU only, optional extra `ablate[vllm]`).

vLLM is imported here and nowhere else, and only when an engine is built. The engine starts from
the trainer's model (saved once to a temporary folder) and runs in the trainer's process
(`VLLM_ENABLE_V1_MULTIPROCESSING=0`), so `sync_weights(model)` after each optimizer step copies
the new weights straight into vLLM's model. Log-probabilities come from vLLM's own kernels and
sampler, so `logprobs_exact` is False and the trainer recomputes old log-probs itself; vLLM does
not report per-token entropy, so `entropy` is NaN on completion tokens (0 on padding).
This module cannot be exercised on the CPU-only CI: its tests are marked `gpu`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence

import torch

from ablate.errors import ConfigError
from ablate.records import Rollouts, SamplingParams
from ablate.rollout.base import checked_request


def _import_vllm():
    if not torch.cuda.is_available():
        raise ConfigError("the vllm rollout engine needs a CUDA GPU; use --engine hf on the CPU")
    try:
        import vllm
    except ImportError:
        raise ConfigError(
            "the vllm rollout engine needs vLLM: pip install 'ablate[vllm]' (GPU only)"
        ) from None
    return vllm


class VLLMEngine:
    """vLLM sampling from a copy of `model`; call `sync_weights(model)` after every update."""

    def __init__(
        self,
        model,
        tokenizer,
        *,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int | None = None,
    ) -> None:
        vllm = _import_vllm()
        self._vllm = vllm
        self.tokenizer = tokenizer
        self.eos_id = int(tokenizer.eos_token_id)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_id
        # In-process engine: weights can then be copied without serialising them to a worker.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self._folder = tempfile.TemporaryDirectory(prefix="ablate-vllm-")
        model.save_pretrained(self._folder.name)
        tokenizer.save_pretrained(self._folder.name)
        self.llm = vllm.LLM(
            model=self._folder.name,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            enforce_eager=True,  # tiny models: CUDA-graph capture costs more than it saves
            enable_prefix_caching=False,  # weights change every step; stale prefixes would lie
        )

    def sync_weights(self, model) -> None:
        """Copy the trainer's current weights into vLLM's model."""
        state = {name: tensor.detach() for name, tensor in model.state_dict().items()}
        self.llm.apply_model(lambda vllm_model: vllm_model.load_weights(state.items()))

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts:
        prompts, ids_per_prompt = checked_request(prompts, n, problem_ids)
        encoded = self.tokenizer(prompts, add_special_tokens=True)["input_ids"]
        requests = [self._vllm.TokensPrompt(prompt_token_ids=list(ids)) for ids in encoded]
        params = [self._params(sampling, n, i) for i in range(len(prompts))]
        outputs = self.llm.generate(requests, params, use_tqdm=False)
        samples = [sample for output in outputs for sample in output.outputs]
        return self._rollouts(encoded, samples, prompts, ids_per_prompt, n)

    def _params(self, sampling: SamplingParams, n: int, prompt_index: int):
        return self._vllm.SamplingParams(
            n=n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k if sampling.top_k > 0 else -1,
            max_tokens=sampling.max_new_tokens,
            stop=list(sampling.stop),
            include_stop_str_in_output=True,
            ignore_eos=sampling.ignore_eos,
            logprobs=0,  # the sampled token's log-prob only
            seed=(sampling.seed * 1_000_003 + prompt_index) % 2**31,
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
            entropy=torch.where(mask > 0, float("nan"), 0.0),
            lengths=lengths,
            truncated=torch.tensor([s.finish_reason == "length" for s in samples]),
            group_ids=torch.arange(len(prompts)).repeat_interleave(n),
            problem_ids=[pid for pid in problem_ids for _ in range(n)],
            prompts=[p for p in prompts for _ in range(n)],
            texts=[s.text for s in samples],
            logprobs_exact=False,
            pad_id=self.pad_id,
        )
