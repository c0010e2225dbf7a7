"""Common random numbers survive dynamic sampling: every arm with one seed draws step s's first
batch from the same prompts with the same sampling seed, refills come from a stream of their own;
an A/A replicate draws everything from a seed stream of its own."""

from __future__ import annotations

import dataclasses
import re

import ablate.base.seeding
import ablate.stages.update
import ablate.trial.setup
from ablate.base.seeding import derive_seed
from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.stages.batch import PromptStream
from ablate.tasks import get_task
from ablate.tasks.base import CHARSET
from ablate.tasks.templates import get_template
from ablate.testing import ScriptedEngine, char_tokenizer, tiny_llama
from ablate.trial import TrainState, rl_step, setup_trial, train

TOK = char_tokenizer(CHARSET)
PLAIN = get_template("plain")
P, G, STEPS = 2, 4, 10
TASK_OPTIONS = (("n_train", 64), ("n_eval", 8))


def true_sum(prompt: str) -> int:
    return sum(int(x) for x in re.search(r"Question: ([\d+]+)", prompt).group(1).split("+"))


def by_sum(prompt: str, j: int, call: int) -> str:
    """A group is all correct (no signal) when its sum is divisible by 3, else half correct: a
    fixed function of the prompt, so every arm gets the same verdicts for the same prompts."""
    total = true_sum(prompt)
    answer = total + (j % 2 if total % 3 else 0)
    return " 1+2=3;" + PLAIN.write_answer(str(answer))


class Recording(ScriptedEngine):
    """A scripted engine that logs (prompts, sampling seed, samples per prompt) of each call."""

    def __init__(self, log: list, tokenizer) -> None:
        super().__init__(by_sum, tokenizer=tokenizer)
        self.log = log

    def generate(self, prompts, n, sampling, **kw):
        self.log.append((tuple(prompts), sampling.seed, n))
        return super().generate(prompts, n, sampling, **kw)


def spec(algo: Algorithm | None = None, **kw) -> TrialSpec:
    defaults = dict(
        algorithm=algo or Algorithm(),
        model="tiny",
        task_options=TASK_OPTIONS,
        budget=Budget(max_steps=STEPS, prompts_per_step=P, group_size=G, max_new_tokens=24),
        eval=EvalSpec(max_problems=4, n_samples=2, ks=(1, 2), at_start=False),
    )
    return TrialSpec(**{**defaults, **kw})


def run_steps(s: TrialSpec) -> tuple[list[list[tuple]], list[tuple[int, int]]]:
    """The engine calls of each of STEPS RL steps, and (stream position, state's) after each."""
    log: list = []
    setup = setup_trial(
        s, loaded=(tiny_llama(0, tokenizer=TOK), TOK), engine=lambda m, tok: Recording(log, tok)
    )
    state = TrainState()
    stream = PromptStream(setup.task.problems("train"), s.rng_seed)
    per_step, positions = [], []
    for _ in range(STEPS):
        before = len(log)
        rl_step(setup, state, stream)
        per_step.append(log[before:])
        positions.append((stream.position, state.stream_position))
    return per_step, positions


def rendered_stream(seed: int, steps: int) -> list[tuple[str, ...]]:
    """Each step's P prompts read straight off a fresh stream of `seed`, as rendered prompts."""
    task = get_task("arithmetic", **dict(TASK_OPTIONS))
    stream = PromptStream(task.problems("train"), seed)
    return [tuple(PLAIN.render(p.question) for p in stream.take(P)) for _ in range(steps)]


def test_dynamic_sampling_arms_keep_common_random_numbers_at_every_step_and_attempt():
    ds_a, pos_a = run_steps(spec(Algorithm(dynamic_sampling=True, clip_high=0.28)))
    ds_b, pos_b = run_steps(spec(Algorithm(dynamic_sampling=True, clip_high=0.2)))
    plain, pos_plain = run_steps(spec(Algorithm()))
    refills = [call for calls in ds_a for call in calls[1:]]
    assert len(refills) >= 3 and sum(len(calls) > 1 for calls in ds_a) >= 3  # several refills
    assert ds_a == ds_b  # same prompts and seeds at every (step, attempt), refills included
    assert all(len(calls) == 1 for calls in plain)
    assert [calls[0] for calls in plain] == [calls[0] for calls in ds_a]
    # step s reads the stream's positions [(s-1)P, sP) and leaves it at sP, in every arm
    expected_positions = [(s * P, s * P) for s in range(1, STEPS + 1)]
    assert pos_a == pos_b == pos_plain == expected_positions
    assert [calls[0][0] for calls in ds_a] == rendered_stream(0, STEPS)
    # the sampling seed is keyed on (seed, step, attempt), not on how many batches came before
    for step, calls in enumerate(ds_a, start=1):
        seeds = [seed for _, seed, _ in calls]
        assert seeds == [
            derive_seed(0, "rollout", str(step), str(a)) for a in range(1, 1 + len(calls))
        ]
    # refills come from their own stream: none of them is a main batch of any step, later
    # steps included (they consume nothing of the main stream)
    mains = set(rendered_stream(0, STEPS))
    assert not any(prompts in mains for prompts, _, _ in refills)
    assert len({prompts for prompts, _, _ in refills}) == len(refills)


def record_seeds(monkeypatch) -> dict[str, list]:
    """Patch the trial's seeded entry points to log the seeds they are given."""
    seen: dict[str, list] = {"everything": [], "minibatch": []}

    def generator(seed, *names, **kw):
        seen["minibatch"].append((seed, *names))
        return ablate.base.seeding.generator(seed, *names, **kw)

    def seed_everything(seed):
        seen["everything"].append(seed)
        ablate.base.seeding.seed_everything(seed)

    monkeypatch.setattr(ablate.stages.update, "generator", generator)
    monkeypatch.setattr(ablate.trial.setup, "seed_everything", seed_everything)
    return seen


def trial_randomness(s: TrialSpec, monkeypatch) -> dict[str, list]:
    """Every seed and prompt a short trial drew: train calls, eval calls, global and minibatch."""
    log: list = []
    seen = record_seeds(monkeypatch)
    train(s, loaded=(tiny_llama(0, tokenizer=TOK), TOK), engine=lambda m, tok: Recording(log, tok))
    seen["train"] = [(prompts, seed) for prompts, seed, n in log if n == G]
    seen["eval"] = [seed for _, seed, n in log if n != G]
    return seen


def test_a_replicate_shares_prompts_and_eval_but_draws_its_own_rollouts_reproducibly(
    monkeypatch,
):
    short = Budget(max_steps=2, prompts_per_step=P, group_size=G, max_new_tokens=24)
    base = spec(Algorithm(minibatches=2), budget=short)
    common = trial_randomness(base, monkeypatch)
    x = trial_randomness(spec(Algorithm(minibatches=2), budget=short, replicate="x"), monkeypatch)
    x_again = trial_randomness(
        spec(Algorithm(minibatches=2), budget=short, replicate="x"), monkeypatch
    )
    assert x == x_again
    assert len(common["train"]) == len(x["train"]) == 2
    # an A/A replicate pairs with its twin by seed: same prompts, same eval samples, same init;
    # only its rollouts (and mini-batch order) draw from a stream of their own
    for (prompts, seed), (x_prompts, x_seed) in zip(common["train"], x["train"], strict=True):
        assert prompts == x_prompts and seed != x_seed
    assert common["eval"] and set(common["eval"]) == set(x["eval"])
    assert set(common["minibatch"]).isdisjoint(x["minibatch"]) and x["minibatch"]
    assert common["everything"] == x["everything"]
    # replicate="" is the study's common random numbers, exactly as before the field existed
    assert base.rng_seed == 0
    assert dataclasses.replace(base, replicate="").id == base.id
    assert dataclasses.replace(base, replicate="x").id != base.id
    assert common["everything"] == [0] and set(common["eval"]) == {derive_seed(0, "eval")}
    assert [prompts for prompts, _ in common["train"]] == rendered_stream(0, 2)
    assert [seed for _, seed in common["train"]] == [
        derive_seed(0, "rollout", str(step), "1") for step in (1, 2)
    ]
    assert ("minibatch", "1", "0") in {names[1:] for names in common["minibatch"]}
    assert {names[0] for names in common["minibatch"]} == {0}


def test_replicate_seed_is_stable_and_differs_by_name_and_seed():
    a, b = spec(replicate="a"), spec(replicate="b")
    assert a.rollout_seed == spec(replicate="a").rollout_seed
    assert a.rollout_seed == derive_seed(0, "replicate", "a") % 2**31
    assert len({a.rollout_seed, b.rollout_seed, spec(replicate="a", seed=1).rollout_seed, 0}) == 4
    assert 0 <= a.rollout_seed < 2**31 and a.rng_seed == b.rng_seed == 0
