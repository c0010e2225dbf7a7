"""One RL step's data: draw prompts → rollouts → verify → dynamic sampling → rewards.

Every generated sample and token is charged to the budget counters, including the batches
dynamic sampling throws away.

Common random numbers survive dynamic sampling: step s's first attempt always draws the main
stream's prompts [(s-1)·P, s·P) with a sampling seed keyed on (seed, step, attempt), and refills
draw from their own stream keyed the same way. So every arm with one seed sees the same first
batch at every step, and two dynamic-sampling arms the same refills, whatever their history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ablate.algorithms import Algorithm
from ablate.errors import TrialError
from ablate.rollout.base import RolloutEngine, Rollouts, SamplingParams
from ablate.seeding import derive_seed, rng
from ablate.shaping import expand_groups, informative_groups
from ablate.tasks.base import Problem, Task, Verdict
from ablate.templates import Template
from ablate.trial import Budget


class PromptStream:
    """Training problems in a seeded order: a fresh permutation per epoch, so the k-th prompt
    depends only on (seed, k). Its whole state is `position` (checkpoint-friendly)."""

    def __init__(self, problems: Sequence[Problem], seed: int, position: int = 0) -> None:
        if not problems:
            raise TrialError("the task's train split is empty")
        self.problems = list(problems)
        self.seed = seed
        self.position = position
        self._orders: dict[int, list[int]] = {}

    def _order(self, epoch: int) -> list[int]:
        if epoch not in self._orders:
            n = len(self.problems)
            self._orders = {epoch: rng(self.seed, "data", str(epoch)).sample(range(n), n)}
        return self._orders[epoch]

    def window(self, start: int, count: int) -> list[Problem]:
        """The problems at stream positions [start, start + count), without moving."""
        out = []
        for position in range(start, start + count):
            epoch, index = divmod(position, len(self.problems))
            out.append(self.problems[self._order(epoch)[index]])
        return out

    def take(self, count: int) -> list[Problem]:
        out = self.window(self.position, count)
        self.position += count
        return out

    def refill(self, step: int, attempt: int, count: int) -> list[Problem]:
        """`count` problems for dynamic sampling's attempt `attempt` (>= 2) of step `step`: a
        seeded draw of their own, so refills never consume (and so never shift) the main
        stream that the other arms read."""
        n = len(self.problems)
        picks = rng(self.seed, "refill", str(step), str(attempt)).sample(range(n), min(count, n))
        return [self.problems[picks[i % len(picks)]] for i in range(count)]


@dataclass
class Counters:
    """Cumulative budget counters of a trial (all logged under budget/)."""

    generated_samples: int = 0
    generated_tokens: int = 0
    trained_tokens: int = 0
    gen_batches: int = 0
    extra_gen_batches: int = 0
    verifier_errors: int = 0

    def as_metrics(self) -> dict[str, float]:
        return {f"budget/{k}": float(v) for k, v in self.__dict__.items()}


@dataclass
class ScoredBatch:
    """Rollouts with their verdicts; `scores` [B] are the verifier's rewards."""

    rollouts: Rollouts
    verdicts: list[Verdict]
    scores: Tensor
    correct: Tensor
    gen_batches: int = 1
    generated: ScoredBatch | None = None
    """Every sample generated for this batch (all attempts, before dynamic sampling's filter);
    None when that is the batch itself."""

    @property
    def all_samples(self) -> ScoredBatch:
        return self if self.generated is None else self.generated

    def select(self, keep: Tensor) -> ScoredBatch:
        idx = keep.nonzero().flatten()
        return ScoredBatch(
            rollouts=self.rollouts.select(idx),
            verdicts=[self.verdicts[i] for i in idx.tolist()],
            scores=self.scores[idx],
            correct=self.correct[idx],
        )


def sampling_for(budget: Budget, template: Template, seed: int) -> SamplingParams:
    return SamplingParams(
        max_new_tokens=budget.max_new_tokens,
        temperature=budget.temperature,
        top_p=budget.top_p,
        top_k=budget.top_k,
        stop=tuple(template.stop),
        seed=seed,
    )


def sample_and_verify(
    engine: RolloutEngine,
    problems: Sequence[Problem],
    template: Template,
    task: Task,
    sampling: SamplingParams,
    *,
    n: int,
) -> ScoredBatch:
    """`n` completions per problem (groups contiguous), each verified: the one place that calls
    the engine's `generate` and the task's `verify` (training, held-out eval, the Pass@G sweep
    and zoo measurement all sample through here). One `generate` call, with `sampling` as given."""
    rollouts = engine.generate(
        [template.render(p.question) for p in problems],
        n,
        sampling,
        problem_ids=[p.id for p in problems],
    )
    verdicts = [task.verify(problems[b // n], t, template) for b, t in enumerate(rollouts.texts)]
    scores = torch.tensor([v.reward for v in verdicts], dtype=torch.float32)
    correct = torch.tensor([bool(v.correct) for v in verdicts], dtype=torch.bool)
    return ScoredBatch(rollouts=rollouts, verdicts=verdicts, scores=scores, correct=correct)


def correct_matrix(batch: ScoredBatch, n: int) -> np.ndarray:
    """The [problems, n] bool correctness of a `sample_and_verify(..., n=n)` batch."""
    return batch.correct.numpy().reshape(-1, n)


def concat_scored(parts: Sequence[ScoredBatch]) -> ScoredBatch:
    return ScoredBatch(
        rollouts=Rollouts.concat([p.rollouts for p in parts]),
        verdicts=[v for p in parts for v in p.verdicts],
        scores=torch.cat([p.scores for p in parts]),
        correct=torch.cat([p.correct for p in parts]),
    )


@dataclass(frozen=True)
class StepSampler:
    """What a trial samples its training batches with (the seed is the trial's RNG seed)."""

    engine: RolloutEngine
    task: Task
    template: Template
    algo: Algorithm
    budget: Budget
    seed: int


def collect_batch(
    sampler: StepSampler, stream: PromptStream, step: int, counters: Counters
) -> ScoredBatch:
    """Step `step`'s batch of `prompts_per_step` groups. With dynamic sampling, keep generating
    until that many groups have unequal verifier rewards (DAPO §3.2: 0 < #correct < G); the
    filter is `shaping.informative_groups`, the refill is sampling, so the loop lives here.

    The main stream moves by exactly P per step, to position step·P, whatever the arm."""
    engine, task, template, algo = sampler.engine, sampler.task, sampler.template, sampler.algo
    budget, seed = sampler.budget, sampler.seed
    p, g = budget.prompts_per_step, budget.group_size
    main = stream.window((step - 1) * p, p)
    stream.position = step * p
    generated: list[ScoredBatch] = []
    kept: list[ScoredBatch] = []
    n_kept = 0
    for attempt in range(1, algo.max_gen_batches + 1):
        problems = main if attempt == 1 else stream.refill(step, attempt, p)
        batch_seed = derive_seed(seed, "rollout", str(step), str(attempt))
        sampling = sampling_for(budget, template, batch_seed)
        scored = sample_and_verify(engine, problems, template, task, sampling, n=g)
        _charge(counters, scored, extra=attempt > 1)
        if not algo.dynamic_sampling:
            return scored
        generated.append(scored)
        keep = informative_groups(scored.scores, g)
        kept.append(scored.select(expand_groups(keep, g)))
        n_kept += int(keep.sum())
        if n_kept >= p:
            batch = concat_scored(kept)
            batch = batch.select(torch.arange(batch.scores.numel()) < p * g)
            batch.gen_batches = attempt
            batch.generated = concat_scored(generated)
            return batch
    raise TrialError(
        f"dynamic sampling found {n_kept} of {p} groups with unequal rewards after "
        f"max_gen_batches={algo.max_gen_batches} generation batches: the base model's groups are "
        "almost all correct or all wrong (check its Pass@G); raise max_gen_batches or turn "
        "dynamic_sampling off"
    )


def _charge(counters: Counters, scored: ScoredBatch, *, extra: bool) -> None:
    counters.gen_batches += 1
    counters.extra_gen_batches += int(extra)
    counters.generated_samples += scored.rollouts.num_samples
    counters.generated_tokens += int(scored.rollouts.lengths.sum())
    counters.verifier_errors += sum(v.error is not None for v in scored.verdicts)
