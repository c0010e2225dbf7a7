"""The `RolloutEngine` protocol the trainer, the eval and the pass@k sweep code against, and the
checks every engine applies to a request. What an engine is asked (`SamplingParams`) and returns
(`Rollouts`) are records (`ablate.base.records`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ablate.base.errors import ConfigError
from ablate.base.records import Rollouts, SamplingParams


@runtime_checkable
class RolloutEngine(Protocol):
    """Samples `n` completions for each prompt; sample b belongs to prompt b // n."""

    def generate(
        self,
        prompts: Sequence[str],
        n: int,
        sampling: SamplingParams,
        *,
        problem_ids: Sequence[str] | None = None,
    ) -> Rollouts: ...

    def sync_weights(self, model: Any) -> None:
        """Make later samples come from `model`'s current weights (the trainer calls it after
        every update; a no-op for engines that sample from the training model itself)."""
        ...


def checked_request(
    prompts: Sequence[str], n: int, problem_ids: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """A `generate` call's arguments checked, as every engine needs them: (prompts, their
    problem ids). Raises ConfigError on a bad group size or a problem-id count mismatch."""
    check_group_size(n)
    prompts = list(prompts)
    return prompts, resolve_problem_ids(prompts, problem_ids)


def resolve_problem_ids(prompts: Sequence[str], problem_ids: Sequence[str] | None) -> list[str]:
    """Problem ids per prompt (defaulting to the prompt's index); raises on a length mismatch."""
    if problem_ids is None:
        return [str(i) for i in range(len(prompts))]
    if len(problem_ids) != len(prompts):
        raise ConfigError(f"got {len(problem_ids)} problem_ids for {len(prompts)} prompts")
    return [str(p) for p in problem_ids]


def check_group_size(n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"n (samples per prompt) must be an integer >= 1, got {n!r}")
