"""The data-side factors without refill: zero-variance filtering (ScaleRL), No-Positive-Resampling
(ScaleRL) and the reward controls (Shao et al. 2025; TTRL's majority vote), on scripted
completions."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from types import SimpleNamespace

import pytest
import torch

from ablate.base.errors import TrialError
from ablate.base.records import Counters, ScoredBatch
from ablate.base.seeding import derive_seed, rng
from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.reward_controls import REWARD_CONTROLS, DrawKey, plurality
from ablate.factors.spec import Budget, TrialSpec
from ablate.stages.batch import PromptStream, StepSampler, collect_batch
from ablate.stages.checkpoint import STATE, checkpoint_dirs
from ablate.tasks import get_task
from ablate.tasks.base import CHARSET
from ablate.tasks.templates import get_template
from ablate.testing import ScriptedEngine, char_tokenizer, tiny_llama
from ablate.tracking import MemoryTracker
from ablate.trial import train

TOK = char_tokenizer(CHARSET)
PLAIN = get_template("plain")
P, G = 2, 4


def loaded():
    return tiny_llama(0, tokenizer=TOK), TOK


def true_sum(prompt: str) -> int:
    return sum(int(x) for x in re.search(r"Question: ([\d+]+)", prompt).group(1).split("+"))


def answer(prompt: str, right: bool) -> str:
    return " 1+2=3;" + PLAIN.write_answer(str(true_sum(prompt) + (0 if right else 1)))


def mixed(prompt: str, j: int, call: int) -> str:
    """Even samples right, odd ones wrong: every group is informative."""
    return answer(prompt, j % 2 == 0)


def all_right(prompt: str, j: int, call: int) -> str:
    return answer(prompt, True)


def easy_if_div3(prompt: str, j: int, call: int) -> str:
    """Prompts whose sum is divisible by 3 always solved (pass rate 1), the others half."""
    return answer(prompt, true_sum(prompt) % 3 == 0 or j % 2 == 0)


def spec(algo: Algorithm, n_train: int = 64, **budget) -> TrialSpec:
    b = dict(max_steps=2, prompts_per_step=P, group_size=G, max_new_tokens=24)
    return TrialSpec(
        algorithm=algo,
        model="tiny",
        task="arithmetic",
        task_options=(("n_train", n_train), ("n_eval", 8)),
        template="plain",
        seed=0,
        budget=Budget(**{**b, **budget}),
        eval=EvalSpec(max_problems=4, n_samples=2, ks=(1, 2), at_start=False),
    )


def scripted(script, log: list | None = None):
    class Logging(ScriptedEngine):
        def generate(self, prompts, n, sampling, **kw):
            if log is not None and n == G:  # training calls only (eval samples 2 per prompt)
                log.append(list(prompts))
            return super().generate(prompts, n, sampling, **kw)

    return lambda model, tok: Logging(script, tokenizer=tok)


def one_batch(algo: Algorithm, script, p: int = P, step: int = 1):
    task = get_task("arithmetic", n_train=64, n_eval=8)
    budget = Budget(max_steps=1, prompts_per_step=p, group_size=G, max_new_tokens=24)
    sampler = StepSampler(ScriptedEngine(script, tokenizer=TOK), task, PLAIN, algo, budget, 0)
    stream, counters = PromptStream(task.problems("train"), 0), Counters()
    return collect_batch(sampler, stream, step, counters), counters, stream


def comparable(tracker: MemoryTracker) -> list:
    return [
        (s, {k: v for k, v in m.items() if "perf/" not in k and "wall" not in k})
        for s, m in tracker.metrics
    ]


# --- zero-variance filtering -----------------------------------------------------------------
def test_zero_variance_filter_drops_exactly_the_flat_groups_and_does_not_refill():
    task = get_task("arithmetic", n_train=64, n_eval=8)
    window = PromptStream(task.problems("train"), 0).window(0, 4)
    prompts = [PLAIN.render(p.question) for p in window]
    assert len(set(prompts)) == 4
    # group 0 all right, 1 mixed, 2 all wrong, 3 mixed: groups 1 and 3 are kept
    patterns = dict(zip(prompts, ["1111", "1010", "0000", "0110"], strict=True))

    def script(prompt, j, call):
        return answer(prompt, patterns[prompt][j] == "1")

    batch, counters, _ = one_batch(Algorithm(zero_variance_filter=True), script, p=4)
    assert batch.rollouts.prompts == [prompts[1]] * G + [prompts[3]] * G
    assert batch.scores.tolist() == [1, 0, 1, 0, 0, 1, 1, 0]
    assert batch.metrics == {"data/kept_groups": 2.0, "data/kept_group_frac": 0.5}
    # nothing generated to refill, and every generated sample is charged and kept for metrics
    assert batch.gen_batches == 1 and counters.gen_batches == 1 and counters.extra_gen_batches == 0
    assert counters.generated_samples == 4 * G == batch.all_samples.rollouts.num_samples
    assert counters.generated_tokens == int(batch.all_samples.rollouts.lengths.sum())
    assert batch.all_samples.correct.sum() == 4 + 2 + 0 + 2


def test_an_all_flat_step_skips_the_update_but_counts_and_logs_the_step():
    model, tok = loaded()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    tracker = MemoryTracker()
    result = train(
        spec(Algorithm(zero_variance_filter=True)),
        tracker=tracker,
        loaded=(model, tok),
        engine=scripted(all_right),
    )
    assert result.outcome == "finished" and result.steps == 2
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    steps = [(s, m) for s, m in tracker.metrics if "data/kept_groups" in m]
    assert [s for s, _ in steps] == [1, 2]
    for step, m in steps:
        assert m["data/kept_groups"] == 0 and m["data/skipped_update"] == 1
        assert m["budget/generated_samples"] == step * P * G and m["budget/trained_tokens"] == 0
        assert m["budget/generated_tokens"] > 0 and m["reward/accuracy"] == 1.0
        assert not any(k.startswith("policy/") for k in m)  # no update, so no loss statistics


def test_a_partly_flat_step_trains_on_the_kept_groups_only():
    task = get_task("arithmetic", n_train=64, n_eval=8)
    window = PromptStream(task.problems("train"), 0).window(0, 8)
    sums = [true_sum(PLAIN.render(p.question)) for p in window]
    informative = [sum(s % 3 != 0 for s in sums[i : i + 4]) for i in (0, 4)]
    assert 0 < informative[0] < 4 or 0 < informative[1] < 4  # the test needs a mixed step
    model, tok = loaded()
    tracker = MemoryTracker()
    result = train(
        spec(Algorithm(zero_variance_filter=True), prompts_per_step=4),
        tracker=tracker,
        loaded=(model, tok),
        engine=scripted(easy_if_div3),
    )
    assert result.outcome == "finished"
    kept = [v for _, v in tracker.history("data/kept_groups")]
    assert kept == informative
    frac = [v for _, v in tracker.history("data/kept_group_frac")]
    assert frac == [k / 4 for k in kept]
    assert all(math.isfinite(v) for _, v in tracker.history("policy/grad_norm"))


# --- No-Positive-Resampling -------------------------------------------------------------------
def fake_batch(ids: list[str], correct: list[int]):
    return SimpleNamespace(
        rollouts=SimpleNamespace(problem_ids=ids), correct=torch.tensor(correct, dtype=torch.bool)
    )


def test_a_prompt_retires_exactly_when_its_running_pass_rate_reaches_the_threshold():
    task = get_task("arithmetic", n_train=8, n_eval=8)
    stream = PromptStream(task.problems("train"), 0)
    # step 1: a 3/4 = 0.75 (retires at 0.75), b 2/4, c 2/4
    stream.record(
        fake_batch(["a"] * 4 + ["b"] * 4 + ["c"] * 4, [1, 1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0]),
        0.75,
    )
    assert stream.history == {"a": [3, 4], "b": [2, 4], "c": [2, 4]} and stream.retired == {"a"}
    # step 2: b 4/4 → 6/8 = 0.75 retires; c 3/4 → 5/8 = 0.625 stays
    stream.record(fake_batch(["b"] * 4 + ["c"] * 4, [1, 1, 1, 1, 1, 1, 1, 0]), 0.75)
    assert stream.history["b"] == [6, 8] and stream.history["c"] == [5, 8]
    assert stream.retired == {"a", "b"}
    # step 3: c 4/4 → 9/12 = 0.75 retires
    stream.record(fake_batch(["c"] * 4, [1, 1, 1, 1]), 0.75)
    assert stream.retired == {"a", "b", "c"} and stream.history["c"] == [9, 12]
    # at 0.9: 8/9 = 0.889 stays, one more right answer makes 9/10 = 0.9 and retires
    stream = PromptStream(task.problems("train"), 0)
    stream.record(fake_batch(["d"] * 9, [1] * 8 + [0]), 0.9)
    assert stream.retired == set()
    stream.record(fake_batch(["d"], [1]), 0.9)
    assert stream.retired == {"d"} and stream.history == {"d": [9, 10]}


def test_refills_skip_retired_prompts_and_are_unchanged_when_none_is_retired():
    problems = get_task("arithmetic", n_train=16, n_eval=8).problems("train")
    stream = PromptStream(problems, 0)
    legacy = rng(0, "refill", "3", "2").sample(range(16), 4)
    assert stream.refill(3, 2, 4) == [problems[i] for i in legacy]
    stream.retired = {p.id for p in problems[:12]}
    picks = stream.refill(3, 2, 6)
    assert len(picks) == 6 and {p.id for p in picks} <= {p.id for p in problems[12:]}


def test_retired_prompts_never_come_back_and_the_stream_moves_past_them():
    log: list = []
    tracker = MemoryTracker()
    s = spec(Algorithm(retire_pass_rate=0.9), n_train=12, max_steps=15)  # 30 draws: 2.5 epochs
    result = train(s, tracker=tracker, loaded=loaded(), engine=scripted(easy_if_div3, log))
    assert result.outcome == "finished" and len(log) == 15
    easy = {PLAIN.render(p.question) for p in get_task("arithmetic", n_train=12).problems("train")}
    easy = {q for q in easy if true_sum(q) % 3 == 0}
    assert 0 < len(easy) < 12
    # an easy prompt (pass rate 1) is seen in exactly one step, then never again
    seen_at = [[i for i, prompts in enumerate(log) if q in prompts] for q in easy]
    assert all(len(steps) == 1 for steps in seen_at)
    # half-solved prompts stay: each comes back in later epochs
    hard = {q for prompts in log for q in prompts} - easy
    assert all(sum(q in prompts for prompts in log) >= 2 for q in hard)
    retired = [v for _, v in tracker.history("data/retired_prompts")]
    assert retired == sorted(retired) and retired[-1] == len(easy)


def test_every_prompt_retired_fails_the_trial_clearly():
    s = spec(Algorithm(retire_pass_rate=0.5), n_train=4, max_steps=5)
    result = train(s, loaded=loaded(), engine=scripted(all_right))
    # steps 1 and 2 read the whole epoch, all solved: step 3 has nothing left
    assert result.outcome == "failed" and result.steps == 2
    assert "retired all 4 training prompts" in result.message and "step 3" in result.message
    # collect_batch refuses before it samples anything (no endless walk along the stream)
    task = get_task("arithmetic", n_train=4)
    stream = PromptStream(task.problems("train"), 0)
    stream.retired = {p.id for p in stream.problems}
    engine = ScriptedEngine(all_right, tokenizer=TOK)
    sampler = StepSampler(engine, task, PLAIN, Algorithm(retire_pass_rate=0.5), s.budget, 0)
    with pytest.raises(TrialError, match="retired all 4 training prompts"):
        collect_batch(sampler, stream, 7, Counters())
    assert engine.calls == 0 and stream.position == 0


def test_resume_keeps_the_history_and_the_retired_set(tmp_path):
    s = dataclasses.replace(
        spec(Algorithm(retire_pass_rate=0.9), n_train=12, max_steps=8), checkpoint_every=1
    )
    full = MemoryTracker()
    train(
        s, tracker=full, run_dir=tmp_path / "full", loaded=loaded(), engine=scripted(easy_if_div3)
    )

    def kill_at_4(step, total, metrics):
        if step == 4:
            raise KeyboardInterrupt

    cut = MemoryTracker()
    with pytest.raises(KeyboardInterrupt):
        train(
            s,
            tracker=cut,
            run_dir=tmp_path / "cut",
            loaded=loaded(),
            engine=scripted(easy_if_div3),
            progress=kill_at_4,
        )
    at_kill = json.loads((checkpoint_dirs(tmp_path / "cut")[0] / STATE).read_text())
    assert at_kill["step"] == 4 and at_kill["retired_prompts"]  # something to carry over
    train(s, tracker=cut, run_dir=tmp_path / "cut", loaded=loaded(), engine=scripted(easy_if_div3))
    states = [
        json.loads((checkpoint_dirs(tmp_path / r)[0] / STATE).read_text()) for r in ("full", "cut")
    ]
    assert states[0]["step"] == states[1]["step"] == 8
    for key in ("retired_prompts", "prompt_history", "stream_position"):
        assert states[0][key] == states[1][key], key
    assert states[0]["stream_position"] > 8 * P  # it skipped retired prompts
    assert set(states[0]["retired_prompts"]) > set(at_kill["retired_prompts"])
    assert comparable(full) == comparable(cut)


# --- reward controls (Spurious Rewards' random, incorrect, majority-vote and format rewards) ----
def blank(n: int, correct: torch.Tensor | None = None) -> ScoredBatch:
    c = torch.zeros(n, dtype=torch.bool) if correct is None else correct
    return ScoredBatch(rollouts=None, verdicts=[], scores=c.float(), correct=c)


def random_draws(n: int, p: float, seed: int, step: int, attempt: int) -> torch.Tensor:
    algo = Algorithm(reward_control="random", reward_control_p=p)
    return REWARD_CONTROLS.get("random")(blank(n), G, DrawKey(seed, step, attempt), algo)


def test_random_rewards_are_seeded_by_seed_step_attempt_and_sample():
    assert torch.equal(random_draws(256, 0.5, 0, 3, 1), random_draws(256, 0.5, 0, 3, 1))
    assert not torch.equal(random_draws(256, 0.5, 0, 3, 1), random_draws(256, 0.5, 0, 3, 2))
    assert not torch.equal(random_draws(256, 0.5, 0, 3, 1), random_draws(256, 0.5, 0, 4, 1))
    assert not torch.equal(random_draws(256, 0.5, 0, 3, 1), random_draws(256, 0.5, 1, 3, 1))
    names = ("reward_control", "3", "1", "sample")
    expected = [derive_seed(0, *names, str(i)) / 2**63 < 0.5 for i in range(256)]
    assert random_draws(256, 0.5, 0, 3, 1).tolist() == [float(e) for e in expected]
    # a sample's draw is its own: a larger batch extends a smaller one's draws
    assert torch.equal(random_draws(300, 0.5, 0, 3, 1)[:256], random_draws(256, 0.5, 0, 3, 1))


def test_the_share_of_random_rewards_is_p():
    n = 20_000
    for p in (0.1, 0.5, 0.8):
        share = random_draws(n, p, 7, 1, 1).mean().item()
        assert abs(share - p) < 4 * math.sqrt(p * (1 - p) / n), p  # 4 binomial standard errors
    assert random_draws(64, 0.0, 7, 1, 1).sum() == 0
    assert random_draws(64, 1.0, 7, 1, 1).sum() == 64


def test_random_rewards_ignore_the_answer_and_keep_true_correctness():
    algo = Algorithm(reward_control="random")
    half, _, _ = one_batch(algo, mixed)
    full, _, _ = one_batch(algo, all_right)
    assert half.correct.tolist() == [True, False] * 4 and full.correct.all()
    assert torch.equal(half.scores, full.scores)  # same draws whatever the answers
    assert torch.equal(half.scores, random_draws(P * G, 0.5, 0, 1, 1))
    assert half.metrics["reward/control_mean"] == half.scores.mean().item()
    assert half.metrics["reward/verifier_mean"] == 0.5 and full.metrics["reward/verifier_mean"] == 1


def test_random_rewards_come_before_zero_variance_filtering():
    # every verifier group is mixed, but p = 1 pays every sample: all groups flat, all dropped
    algo = Algorithm(reward_control="random", reward_control_p=1.0, zero_variance_filter=True)
    batch, counters, _ = one_batch(algo, mixed)
    assert batch.metrics["data/kept_groups"] == 0 and batch.rollouts.num_samples == 0
    assert batch.all_samples.correct.tolist() == [True, False] * 4
    assert counters.generated_samples == P * G


def two_right_two_wrong(prompt: str, j: int, call: int) -> str:
    """Samples 0 and 1 right, 2 off by one, 3 off by two: the majority is the right answer."""
    return " 1+2=3;" + PLAIN.write_answer(str(true_sum(prompt) + (0, 0, 1, 2)[j % G]))


def mostly_wrong(prompt: str, j: int, call: int) -> str:
    """Sample 0 right, the other three off by one: the majority is a wrong answer."""
    return answer(prompt, j % G == 0)


def test_majority_vote_pays_the_groups_most_frequent_answer():
    algo = Algorithm(reward_control="majority_vote")
    right, _, _ = one_batch(algo, two_right_two_wrong)
    assert right.scores.tolist() == [1.0, 1.0, 0.0, 0.0] * P
    wrong, _, _ = one_batch(algo, mostly_wrong)  # TTRL pays the majority, right or wrong
    assert wrong.scores.tolist() == [0.0, 1.0, 1.0, 1.0] * P
    assert wrong.correct.tolist() == [True, False, False, False] * P


def test_incorrect_pays_agreement_with_the_groups_most_frequent_wrong_answer():
    algo = Algorithm(reward_control="incorrect")
    wrong, _, _ = one_batch(algo, mostly_wrong)
    assert wrong.scores.tolist() == [0.0, 1.0, 1.0, 1.0] * P
    nothing_wrong, _, _ = one_batch(algo, all_right)
    assert nothing_wrong.scores.sum() == 0
    # two wrong answers, one vote each: a seeded draw picks one of them, so one of the two is paid
    tied, _, _ = one_batch(algo, two_right_two_wrong)
    for group in tied.scores.reshape(P, G).tolist():
        assert group[:2] == [0.0, 0.0] and sorted(group[2:]) == [0.0, 1.0]
    again, _, _ = one_batch(algo, two_right_two_wrong)
    assert torch.equal(tied.scores, again.scores)


def test_plurality_breaks_ties_by_a_seeded_draw_and_ignores_missing_answers():
    key = DrawKey(0, 1, 1)
    assert plurality(["7", None, "7", "8"], key, 0) == "7"
    assert plurality([None, None], key, 0) is None
    picks = {plurality(["1", "2"], DrawKey(s, 1, 1), 0) for s in range(40)}
    assert picks == {"1", "2"}  # both sides of a tie are drawn over seeds


def test_format_only_pays_the_answer_format_right_or_wrong():
    def formatted_or_not(prompt: str, j: int, call: int) -> str:
        return answer(prompt, j % 2 == 0) if j % G < 2 else " 1+2=3; no answer"

    batch, _, _ = one_batch(Algorithm(reward_control="format_only"), formatted_or_not)
    assert batch.scores.tolist() == [1.0, 1.0, 0.0, 0.0] * P
    assert batch.correct.tolist() == [True, False, False, False] * P
