"""A fake `vllm` module for CPU tests of `ablate.rollout.vllm`: it records what ablate passes to
vLLM (the `LLM(...)` arguments, every `SamplingParams`, the seeds, weight syncs, shutdowns) and
answers `generate` with samples that depend only on each request's seed, as vLLM's do.

    fake = FakeVLLM()
    monkeypatch.setitem(sys.modules, "vllm", fake)   # and torch.cuda.is_available -> True

Its `SamplingParams` applies the checks of vLLM's own (vllm/sampling_params.py `_verify_args`):
a test that ablate refuses a setting first sees no `SamplingParams` recorded at all.
"""

from __future__ import annotations

import random
import types
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Logprob:
    logprob: float


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]]
    text: str
    finish_reason: str


@dataclass
class RequestOutput:
    outputs: list[Completion]


@dataclass
class Calls:
    """Everything the fake saw, in order."""

    llm_kwargs: list[dict[str, Any]] = field(default_factory=list)
    sampling: list[FakeSamplingParams] = field(default_factory=list)
    prompts: list[list[int]] = field(default_factory=list)
    loaded_weights: list[list[str]] = field(default_factory=list)
    shutdowns: int = 0

    @property
    def seeds(self) -> list[int | None]:
        return [p.seed for p in self.sampling]


class FakeSamplingParams:
    def __init__(self, calls: Calls, **kwargs: Any) -> None:
        temperature = kwargs.get("temperature", 1.0)
        if not 0 <= temperature <= 2:
            raise ValueError(f"temperature must be in [0, 2], got {temperature}.")
        if temperature < 1e-5 and kwargs.get("n", 1) > 1:
            raise ValueError(f"n must be 1 when using greedy sampling, got {kwargs['n']}.")
        self.__dict__.update(kwargs)
        self.kwargs = kwargs
        calls.sampling.append(self)


class _Model:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls

    def load_weights(self, items) -> None:
        self.calls.loaded_weights.append([name for name, _ in items])


class FakeLLM:
    """Samples `max_tokens` tokens (or fewer, ending in `eos`) from the request's seed."""

    eos = 2

    def __init__(self, calls: Calls, **kwargs: Any) -> None:
        self.calls = calls
        calls.llm_kwargs.append(kwargs)
        core = types.SimpleNamespace(shutdown=self._shutdown)
        self.llm_engine = types.SimpleNamespace(engine_core=core)

    def _shutdown(self) -> None:
        self.calls.shutdowns += 1

    def apply_model(self, fn) -> None:
        fn(_Model(self.calls))

    def generate(self, requests, params, use_tqdm: bool = True) -> list[RequestOutput]:
        out = []
        for request, p in zip(requests, params, strict=True):
            self.calls.prompts.append(list(request["prompt_token_ids"]))
            out.append(RequestOutput([self._sample(p, j) for j in range(p.n)]))
        return out

    def _sample(self, p: FakeSamplingParams, child: int) -> Completion:
        seed = None if p.seed is None else p.seed + child  # vLLM's children: seed + j
        rng = random.Random(seed)
        tokens = [rng.randrange(4, 40) for _ in range(p.max_tokens)]
        stop = rng.randrange(1, p.max_tokens + 1)
        ended = stop < p.max_tokens
        tokens = [*tokens[:stop], self.eos] if ended else tokens
        logprobs = [{t: Logprob(-0.25 * (1 + k % 3))} for k, t in enumerate(tokens)]
        text = "".join(chr(32 + t) for t in tokens)
        return Completion(tokens, logprobs, text, "stop" if ended else "length")


class FakeVLLM(types.ModuleType):
    """Stands in for the `vllm` package; `calls` holds what it was asked."""

    def __init__(self, version: str = "0.19.1") -> None:
        super().__init__("vllm")
        self.__version__ = version
        self.calls = Calls()
        calls = self.calls
        self.LLM = lambda **kwargs: FakeLLM(calls, **kwargs)
        self.SamplingParams = lambda **kwargs: FakeSamplingParams(calls, **kwargs)
        self.TokensPrompt = dict
