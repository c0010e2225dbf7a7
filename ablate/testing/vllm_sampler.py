"""The sampling half of the fake `vllm` (`ablate.testing.vllm`): its `SamplingParams`, with the
fields and checks of vLLM 0.19's (an unknown keyword is a TypeError, as msgspec raises for
vLLM's), and one sampling step as vLLM's v1 sampler takes it, so that a CPU test sees what
temperature, top-k, top-p and the `logprobs_mode` do to the log-probs vLLM returns.

vLLM's step, in order (vllm/v1/sample/sampler.py, ops/topk_topp_sampler.py `forward_native`):
the logits in fp32; "raw_logprobs" are their log-softmax, taken before anything else; a greedy
request (temperature < 1e-5) takes the argmax, and its "processed_logprobs" are the same
log-softmax; a random one divides by the temperature, masks everything outside the top k (ties
with the k-th kept), then everything whose mass from below reaches 1 - top_p (the top token is
always kept), samples by an exponential race drawn from the request's seeded generator, and its
"processed_logprobs" are the log-softmax of those masked logits: the distribution it sampled
from, renormalised.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

SAMPLING_EPS = 1e-5  # below: greedy (vllm/sampling_params.py _SAMPLING_EPS)
MIN_TEMPERATURE = 1e-2  # a positive temperature below is raised to it, with a warning (_MAX_TEMP)
MAX_TEMPERATURE = 2.0
LOGPROBS_MODES = ("raw_logprobs", "raw_logits", "processed_logprobs", "processed_logits")

#: vLLM 0.19's `SamplingParams` fields a caller may set, with their defaults.
FIELDS: dict[str, Any] = {
    "n": 1,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
    "seed": None,
    "stop": None,
    "stop_token_ids": None,
    "ignore_eos": False,
    "max_tokens": 16,
    "min_tokens": 0,
    "logprobs": None,
    "prompt_logprobs": None,
    "detokenize": True,
    "skip_special_tokens": True,
    "spaces_between_special_tokens": True,
    "logits_processors": None,
    "include_stop_str_in_output": False,
    "truncate_prompt_tokens": None,
    "output_kind": None,
    "structured_outputs": None,
    "logit_bias": None,
    "allowed_token_ids": None,
    "extra_args": None,
    "bad_words": None,
}


class FakeSamplingParams:
    """vLLM's `SamplingParams`: refuses unknown keywords and what `_verify_args` refuses, and
    changes what its `__post_init__` changes (a tiny temperature raised, greedy unfiltered)."""

    def __init__(self, **kwargs: Any) -> None:
        for name in kwargs:
            if name not in FIELDS:
                raise TypeError(f"Unexpected keyword argument '{name}'")
        self.kwargs = dict(kwargs)
        self.__dict__.update({**FIELDS, **kwargs})
        self._verify()
        if 0 < self.temperature < MIN_TEMPERATURE:
            self.temperature = MIN_TEMPERATURE
        if self.temperature < SAMPLING_EPS:
            self.top_p, self.top_k = 1.0, 0
        if self.top_k == -1:
            self.top_k = 0
        self.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    def _verify(self) -> None:
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if not 0 <= self.temperature <= MAX_TEMPERATURE:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if not isinstance(self.top_k, int) or self.top_k < -1:
            raise ValueError(f"top_k must be 0 (disable), or at least 1, got {self.top_k}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.temperature < SAMPLING_EPS and self.n > 1:
            raise ValueError(f"n must be 1 when using greedy sampling, got {self.n}.")


def mask_top_k_top_p(logits: Tensor, top_k: int, top_p: float) -> Tensor:
    """`logits` [V] with -inf outside the top `top_k` (0 = all; ties with the k-th kept), then
    outside the nucleus: a token goes when the mass of the tokens below it and itself, in the
    renormalised top-k distribution, is at most 1 - top_p; the top token always stays."""
    out = logits.clone()
    if 0 < top_k < out.numel():
        kth = out.topk(top_k).values[-1]
        out = out.masked_fill(out < kth, float("-inf"))
    if top_p < 1.0:
        ascending, order = out.sort()
        mass_up_to = ascending.softmax(-1).cumsum(-1)
        drop = mass_up_to <= 1 - top_p
        drop[-1] = False
        out[order[drop]] = float("-inf")
    return out


def sample_step(
    logits: Tensor, params: FakeSamplingParams, generator: torch.Generator | None, mode: str
) -> tuple[int, float]:
    """(token, the log-prob `mode` reports for it) of one step from `logits` [V]."""
    logits = logits.float()
    if params.temperature < SAMPLING_EPS:
        token = int(logits.argmax())
        processed = logits
    else:
        processed = mask_top_k_top_p(logits / params.temperature, params.top_k, params.top_p)
        probs = processed.softmax(-1)
        race = torch.empty_like(probs).exponential_(generator=generator)
        token = int((probs / race).argmax())
    reported = {
        "raw_logprobs": logits.log_softmax(-1),
        "raw_logits": logits,
        "processed_logprobs": processed.log_softmax(-1),
        "processed_logits": processed,
    }[mode]
    return token, float(reported[token])
