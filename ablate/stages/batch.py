"""One RL step's data: draw prompts → rollouts → verify → (reward control) → dynamic sampling or
zero-variance filtering → rewards; then No-Positive-Resampling's per-prompt record.

The group filter (`informative_groups`: which groups have unequal rewards) lives here with the
two sampling loops that apply it. Every generated sample and token is charged to the budget
counters, including the batches dynamic sampling throws away and the groups zero-variance
filtering drops.

Common random numbers survive dynamic sampling: step s's first attempt always draws the main
stream's prompts [(s-1)·P, s·P) with a sampling seed keyed on (seed, step, attempt), and refills
draw from their own stream keyed the same way. So every arm with one seed sees the same first
batch at every step, and two dynamic-sampling arms the same refills, whatever their history.
No-Positive-Resampling is the one factor that gives this up on purpose: which prompts an arm
still trains on depends on its own history, so its main stream skips the retired ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ablate.base.errors import TrialError
from ablate.base.records import Counters, ScoredBatch
from ablate.base.seeding import derive_seed, rng
from ablate.factors.algorithms import Algorithm
from ablate.factors.reward_controls import DrawKey, control_rewards
from ablate.factors.spec import Budget
from ablate.rollout.base import RolloutEngine
from ablate.rollout.sample import sample_and_verify, sampling_for
from ablate.tasks.base import Problem, Task
from ablate.tasks.templates import Template


class PromptStream:
    """Training problems in a seeded order: a fresh permutation per epoch, so the k-th prompt
    depends only on (seed, k). Its state is `position`, plus, under No-Positive-Resampling, each
    prompt's record `history` (id → [correct, sampled]) and the `retired` ids it skips; all three
    go into the trial's checkpoint."""

    def __init__(
        self,
        problems: Sequence[Problem],
        seed: int,
        position: int = 0,
        *,
        history: dict[str, Sequence[int]] | None = None,
        retired: Sequence[str] = (),
    ) -> None:
        if not problems:
            raise TrialError("the task's train split is empty")
        self.problems = list(problems)
        self.seed = seed
        self.position = position
        self.history: dict[str, list[int]] = {k: list(v) for k, v in (history or {}).items()}
        self.retired: set[str] = set(retired)
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

    @property
    def all_retired(self) -> bool:
        return {p.id for p in self.problems} <= self.retired

    def take_active(self, count: int) -> list[Problem]:
        """The next `count` problems that are not retired; the position moves past retired
        ones too. The caller checks `all_retired` first (this would never return)."""
        out: list[Problem] = []
        while len(out) < count:
            (problem,) = self.take(1)
            if problem.id not in self.retired:
                out.append(problem)
        return out

    def refill(self, step: int, attempt: int, count: int) -> list[Problem]:
        """`count` problems for dynamic sampling's attempt `attempt` (>= 2) of step `step`: a
        seeded draw of their own, so refills never consume (and so never shift) the main
        stream that the other arms read. Retired problems are not drawn; with none retired the
        draw is the one over every problem."""
        pool = [i for i, p in enumerate(self.problems) if p.id not in self.retired]
        draw = rng(self.seed, "refill", str(step), str(attempt))
        picks = draw.sample(pool, min(count, len(pool)))
        return [self.problems[picks[i % len(picks)]] for i in range(count)]

    def record(self, batch: ScoredBatch, retire_at: float) -> None:
        """Add every sample of `batch` to its prompt's history (by true correctness, whatever
        reward was trained on), then retire each prompt whose pass rate is >= `retire_at`."""
        for pid, ok in zip(batch.rollouts.problem_ids, batch.correct.tolist(), strict=True):
            counts = self.history.setdefault(pid, [0, 0])
            counts[0] += int(ok)
            counts[1] += 1
        for pid, (correct, sampled) in self.history.items():
            if sampled and correct / sampled >= retire_at:
                self.retired.add(pid)


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
    """Step `step`'s batch of `prompts_per_step` groups, with the data-side factors of the
    sampler's algorithm applied: the reward control on every attempt, then dynamic sampling (refill)
    or zero-variance filtering (no refill: the batch may end up with no group at all), then
    No-Positive-Resampling's record of every generated sample.

    Without No-Positive-Resampling the main stream moves by exactly P per step, to position
    step·P, whatever the arm."""
    algo, g = sampler.algo, sampler.budget.group_size
    main = _main_prompts(stream, step, sampler.budget.prompts_per_step, algo)
    if algo.dynamic_sampling:
        batch = _dynamic_sampling(sampler, stream, main, step, counters)
    else:
        batch = _attempt(sampler, main, step, 1, counters)
    metrics: dict[str, float] = {}
    if algo.zero_variance_filter:
        batch, metrics = _drop_flat_groups(batch, g)
    if algo.reward_control != "none":
        metrics.update(_reward_control_metrics(batch.all_samples))
    if algo.retire_pass_rate is not None:
        stream.record(batch.all_samples, algo.retire_pass_rate)
        metrics["data/retired_prompts"] = float(len(stream.retired))
    batch.metrics = metrics
    return batch


def _main_prompts(stream: PromptStream, step: int, p: int, algo: Algorithm) -> list[Problem]:
    if algo.retire_pass_rate is None:
        stream.position = step * p
        return stream.window((step - 1) * p, p)
    if stream.all_retired:
        raise TrialError(
            f"No-Positive-Resampling has retired all {len(stream.retired)} training prompts "
            f"(pass rate >= retire_pass_rate={algo.retire_pass_rate}) before step {step}: "
            "nothing is left to train on; raise retire_pass_rate, use a larger train split "
            "or fewer steps"
        )
    return stream.take_active(p)


def _reward_control_metrics(every: ScoredBatch) -> dict[str, float]:
    # `reward/mean` is the control's reward trained on; this is what the verifier would have paid
    verifier = sum(v.reward for v in every.verdicts) / len(every.verdicts)
    return {
        "reward/control_mean": every.scores.mean().item(),
        "reward/verifier_mean": verifier,
    }


def _attempt(
    sampler: StepSampler, problems: list[Problem], step: int, attempt: int, counters: Counters
) -> ScoredBatch:
    """One generation batch of `problems`, verified, charged, and under a reward control its
    scores replaced (before any filter looks at them)."""
    budget, seed = sampler.budget, sampler.seed
    batch_seed = derive_seed(seed, "rollout", str(step), str(attempt))
    sampling = sampling_for(budget, sampler.template, batch_seed)
    scored = sample_and_verify(
        sampler.engine, problems, sampler.template, sampler.task, sampling, n=budget.group_size
    )
    _charge(counters, scored, extra=attempt > 1)
    key = DrawKey(seed, step, attempt)
    return control_rewards(scored, budget.group_size, key, sampler.algo)


def _dynamic_sampling(
    sampler: StepSampler, stream: PromptStream, main: list[Problem], step: int, counters: Counters
) -> ScoredBatch:
    """Keep generating until P groups have unequal rewards (DAPO §3.2: 0 < #correct < G)."""
    algo, p, g = sampler.algo, sampler.budget.prompts_per_step, sampler.budget.group_size
    generated: list[ScoredBatch] = []
    kept: list[ScoredBatch] = []
    n_kept = 0
    for attempt in range(1, algo.max_gen_batches + 1):
        problems = main if attempt == 1 else stream.refill(step, attempt, p)
        scored = _attempt(sampler, problems, step, attempt, counters)
        generated.append(scored)
        keep = informative_groups(scored.scores, g)
        kept.append(scored.select(expand_groups(keep, g)))
        n_kept += int(keep.sum())
        if n_kept >= p:
            batch = ScoredBatch.concat(kept)
            batch = batch.select(torch.arange(batch.scores.numel()) < p * g)
            batch.gen_batches = attempt
            batch.generated = ScoredBatch.concat(generated)
            return batch
    raise TrialError(
        f"dynamic sampling found {n_kept} of {p} groups with unequal rewards after "
        f"max_gen_batches={algo.max_gen_batches} generation batches: the base model's groups are "
        "almost all correct or all wrong (check its Pass@G); raise max_gen_batches or turn "
        "dynamic_sampling off"
    )


def _drop_flat_groups(scored: ScoredBatch, g: int) -> tuple[ScoredBatch, dict[str, float]]:
    """ScaleRL's zero-variance filtering: drop the groups whose rewards are all equal (they
    have zero group-relative advantage) and generate nothing to replace them, unlike dynamic
    sampling. Every sample stays in `generated`, so metrics over all samples still see them."""
    keep = informative_groups(scored.scores, g)
    batch = scored.select(expand_groups(keep, g))
    batch.generated = scored
    n_kept = int(keep.sum())
    share = n_kept / keep.numel() if keep.numel() else 0.0
    return batch, {"data/kept_groups": float(n_kept), "data/kept_group_frac": share}


def informative_groups(rewards: Tensor, group_size: int) -> Tensor:
    """DAPO dynamic sampling: bool [n_groups], True where the group's rewards are not all equal
    (all-correct and all-wrong groups have zero advantage and carry no gradient)."""
    if rewards.ndim != 1 or group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"{tuple(rewards.shape)} rewards do not split into groups of {group_size}")
    grouped = rewards.reshape(-1, group_size)
    return (grouped != grouped[:, :1]).any(dim=1)


def expand_groups(keep_groups: Tensor, group_size: int) -> Tensor:
    """Group-level bool [n] → sample-level bool [n·G]."""
    return keep_groups.repeat_interleave(group_size)


def _charge(counters: Counters, scored: ScoredBatch, *, extra: bool) -> None:
    counters.gen_batches += 1
    counters.extra_gen_batches += int(extra)
    counters.generated_samples += scored.rollouts.num_samples
    counters.generated_tokens += int(scored.rollouts.lengths.sum())
    counters.verifier_errors += sum(v.error is not None for v in scored.verdicts)
