"""Reward controls (`Algorithm.reward_control`): arms trained on a reward that is not the
verifier's, to separate what RL elicits from what it learns. Each value is one function with one
signature: the training rewards [B] of a verified generation batch whose samples come in
contiguous groups of G per prompt. `correct` stays the verifier's, so every accuracy metric (and
the eval) keeps measuring real accuracy.

The controls are the points of Shao et al. 2025, "Spurious Rewards: Rethinking Training Signals
in RLVR" (arXiv 2506.10947, §2): random, incorrect-label, format and majority-vote rewards; and a
graded one between the verifier and the random control, `noisy`: each sample's reward replaced, with
probability `reward_noise_fraction` f, by the random control's coin (f = 0 is the verifier, f = 1
the random control, draw for draw), a declared, smaller effect that calibrates a study's power
near its MDE rather than only against a gross failure. The
majority vote is TTRL's (Zuo et al. 2025, "TTRL: Test-Time Reinforcement Learning", arXiv
2504.16084): the label is the most frequent answer among the group's own samples, so it needs no
ground truth. Pair a random control with a majority-vote one: "true − random" alone mixes the
learning signal with what any reward elicits (the format, the answer style).

Every draw is seeded per (trial seed, step, generation attempt, sample) through
`ablate.base.seeding`: two arms with one seed draw the same random rewards and break the same vote
ties, whatever their history, and a sample's draw does not depend on the batch around it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ablate.base.lazy import torch
from ablate.base.registry import AlgorithmFields, FieldRule, Registry, finite
from ablate.base.seeding import derive_seed

if TYPE_CHECKING:
    from torch import Tensor

    from ablate.base.records import ScoredBatch

#: 2^63: derive_seed's range, so seed / UNIT is uniform in [0, 1).
UNIT = float(2**63)


@dataclass(frozen=True)
class DrawKey:
    """Where a generation batch sits in its trial: what every control's draws are keyed on."""

    seed: int
    step: int
    attempt: int

    def uniform(self, *names: str) -> float:
        """One uniform draw in [0, 1) for the stream `names` of this batch."""
        return (
            derive_seed(self.seed, "reward_control", str(self.step), str(self.attempt), *names)
            / UNIT
        )


# scored batch, group size G, draw key, algo -> training rewards [B] (float32)
ControlFn = Callable[["ScoredBatch", int, DrawKey, AlgorithmFields], "Tensor"]
REWARD_CONTROLS: Registry[ControlFn] = Registry("reward control")

REWARD_P = FieldRule(
    "reward_control_p",
    lambda v, a: finite(v) and 0 <= v <= 1,
    "must be a probability in [0, 1] (Spurious Rewards uses 0.5)",
)


REWARD_NOISE = FieldRule(
    "reward_noise_fraction",
    lambda v, a: finite(v) and 0 <= v <= 1,
    "must be a share in [0, 1] (0: the verifier's rewards, 1: the random control's)",
)


def _rewards(values: Sequence[float]) -> Tensor:
    return torch.tensor(list(values), dtype=torch.float32)


@REWARD_CONTROLS.register("none")
def verifier(scored: ScoredBatch, group_size: int, key: DrawKey, algo: AlgorithmFields):
    return scored.scores


@REWARD_CONTROLS.register("random", reads=(REWARD_P,))
def random_reward(scored: ScoredBatch, group_size: int, key: DrawKey, algo: AlgorithmFields):
    # Spurious Rewards §2 "random reward": 1 with probability p, whatever the answer
    n = scored.scores.numel()
    return _rewards(float(key.uniform("sample", str(i)) < algo.reward_control_p) for i in range(n))


@REWARD_CONTROLS.register("noisy", reads=(REWARD_NOISE, REWARD_P))
def noisy_reward(scored: ScoredBatch, group_size: int, key: DrawKey, algo: AlgorithmFields):
    # each sample, with probability f (its own "noise" draw), gets the random control's coin (the
    # random control's own "sample" draw) instead of the verifier's reward
    f, p = algo.reward_noise_fraction, algo.reward_control_p
    verifier = scored.scores.tolist()
    return _rewards(
        float(key.uniform("sample", str(i)) < p) if key.uniform("noise", str(i)) < f else r
        for i, r in enumerate(verifier)
    )


@REWARD_CONTROLS.register("format_only")
def format_only(scored: ScoredBatch, group_size: int, key: DrawKey, algo: AlgorithmFields):
    # Spurious Rewards §2 "format reward" (a non-empty \boxed{} there): 1 for a completion in the
    # template's answer format, right or wrong
    return _rewards(float(v.format_ok and v.error is None) for v in scored.verdicts)


def _answer(verdict: Any) -> str | None:
    answer = verdict.answer if verdict.error is None else None
    return None if answer is None or not answer.strip() else answer.strip()


def plurality(answers: Sequence[str | None], key: DrawKey, group: int) -> str | None:
    """The most frequent non-empty answer; a tie is broken by a seeded draw; None if none."""
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None
    top = max(counts.values())
    tied = sorted(a for a, c in counts.items() if c == top)
    return tied[int(key.uniform("tie", str(group)) * len(tied))]


def _match_label(scored: ScoredBatch, group_size: int, key: DrawKey, wrong_only: bool) -> Tensor:
    answers = [_answer(v) for v in scored.verdicts]
    correct = scored.correct.tolist()
    out: list[float] = []
    for g, start in enumerate(range(0, len(answers), group_size)):
        group = answers[start : start + group_size]
        ok = correct[start : start + group_size]
        voters = [a if not (wrong_only and c) else None for a, c in zip(group, ok, strict=True)]
        label = plurality(voters, key, g)
        out += [float(label is not None and a == label) for a in group]
    return _rewards(out)


@REWARD_CONTROLS.register("majority_vote")
def majority_vote(scored: ScoredBatch, group_size: int, key: DrawKey, algo: AlgorithmFields):
    # TTRL §3: the group's majority answer is the label; reward 1 for a sample that gives it
    return _match_label(scored, group_size, key, wrong_only=False)


@REWARD_CONTROLS.register("incorrect")
def incorrect_label(scored: ScoredBatch, group_size: int, key: DrawKey, algo: AlgorithmFields):
    # Spurious Rewards §2 "incorrect label": reward agreement with a wrong label. The paper labels
    # each problem once, offline; here the label is the group's most frequent wrong answer at each
    # step (a group with no wrong answer pays nothing)
    return _match_label(scored, group_size, key, wrong_only=True)


def control_rewards(
    scored: ScoredBatch, group_size: int, key: DrawKey, algo: AlgorithmFields
) -> ScoredBatch:
    """`scored` with its training rewards replaced by the control's (the verifier's for none)."""
    if algo.reward_control == "none":
        return scored
    rewards = REWARD_CONTROLS.get(algo.reward_control)(scored, group_size, key, algo)
    return replace(scored, scores=rewards.to(scored.scores.dtype))
