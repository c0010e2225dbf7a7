"""Evaluation on a generated-token cadence (`EvalSpec.every_tokens`), at most once per step and
resumable without extra state; and the eval's inference cost per correct answer."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ablate.base.errors import ConfigError
from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, TrialSpec
from ablate.tasks.base import CHARSET
from ablate.tasks.templates import get_template
from ablate.testing import ScriptedEngine, ToyTask, ToyTemplate, char_tokenizer, tiny_llama
from ablate.tracking import MemoryTracker
from ablate.trial import train
from ablate.trial.evaluation import due_marks, evaluate, log_mark, token_mark

TOK = char_tokenizer(CHARSET)
PLAIN = get_template("plain")
#: prompts x group size x max_new_tokens: every step generates 2 x 4 x 24 = 192 tokens
BUDGET = Budget(max_steps=7, prompts_per_step=2, group_size=4, max_new_tokens=24)


def loaded():
    return tiny_llama(0, tokenizer=TOK), TOK


def scripted(script):
    return lambda model, tok: ScriptedEngine(script, tokenizer=tok)


def always_truncated(prompt: str, j: int, call: int) -> str:
    return "1" * 100  # no stop string: cut at max_new_tokens, so exactly 24 tokens


def mixed(prompt: str, j: int, call: int) -> str:
    """Even samples correct, odd samples off by one (answers of 2-3 digits: uneven lengths)."""
    total = sum(int(x) for x in re.search(r"Question: ([\d+]+)", prompt).group(1).split("+"))
    return " 1+2=3;" + PLAIN.write_answer(str(total + j % 2))


def spec(every_tokens: int, **kw) -> TrialSpec:
    defaults = dict(
        algorithm=Algorithm(),
        model="tiny",
        task_options=(("n_train", 64), ("n_eval", 8)),
        budget=BUDGET,
        eval=EvalSpec(max_problems=4, n_samples=2, ks=(1, 2), at_start=False, every_tokens=0),
    )
    defaults.update(kw)
    defaults["eval"] = dataclasses.replace(defaults["eval"], every_tokens=every_tokens)
    return TrialSpec(**defaults)


def eval_steps(tracker: MemoryTracker) -> list[int]:
    return [step for step, _ in tracker.history("eval/pass_at_1")]


def test_token_mark_by_hand():
    assert token_mark(250, 0, 192) is None
    assert token_mark(250, 192, 384) == 250
    assert token_mark(250, 200, 250) == 250  # reaching a multiple exactly crosses it
    assert token_mark(250, 250, 499) is None  # starting on it does not
    assert token_mark(90, 0, 192) == 180  # two marks crossed: the larger one
    assert token_mark(0, 0, 10**9) is None  # cadence off


def test_evals_happen_at_the_hand_computed_token_marks_once_per_step():
    tracker = MemoryTracker()
    s = spec(250, eval=dataclasses.replace(spec(0).eval, every=5))
    train(s, tracker=tracker, loaded=loaded(), engine=scripted(always_truncated))
    tokens = [v for _, v in tracker.history("budget/generated_tokens")]
    assert tokens == [192.0 * step for step in range(1, 8)]
    # 192 384 576 768 960 1152 1344 cross 250 (step 2), 500 (3), 750 (4), 1000 (6); step 5 is
    # the step cadence (no mark crossed); step 7 crosses 1250 but is the last: the final eval
    assert eval_steps(tracker) == [2, 3, 4, 5, 6, 7]
    assert tracker.history("eval/token_mark") == [(2, 250.0), (3, 500.0), (4, 750.0), (6, 1000.0)]


def test_a_step_crossing_several_marks_evaluates_once_at_the_largest():
    tracker = MemoryTracker()
    s = spec(90, budget=dataclasses.replace(BUDGET, max_steps=3))
    train(s, tracker=tracker, loaded=loaded(), engine=scripted(always_truncated))
    # 192 crosses 90 and 180; 384 crosses 270 and 360; step 3 is the final eval
    assert eval_steps(tracker) == [1, 2, 3]
    assert tracker.history("eval/token_mark") == [(1, 180.0), (2, 360.0)]


def test_log_mark_by_hand():
    # marks 100, 1000, 10000 (one per decade) and 100, 316.2, 1000, ... (two per decade)
    assert log_mark(100, 1, 0, 99) is None
    assert log_mark(100, 1, 0, 100) == 100  # reaching a mark exactly crosses it
    assert log_mark(100, 1, 100, 999) is None  # starting on it does not
    assert log_mark(100, 1, 50, 20_000) == 10_000  # several crossed: the largest
    assert log_mark(100, 2, 300, 400) == pytest.approx(100 * 10**0.5)
    assert log_mark(0, 4, 0, 10**9) is None  # cadence off


def test_due_marks_takes_the_largest_mark_per_axis():
    spec = EvalSpec(every_tokens=250, log_from=100, log_per_decade=1, every_flops=1e6)
    before, after = {"tokens": 90, "flops": 5e5}, {"tokens": 260, "flops": 9e5}
    assert due_marks(spec, before, after) == {"eval/token_mark": 250.0}  # log 100 < linear 250
    after = {"tokens": 1100, "flops": 2.1e6}
    assert due_marks(spec, before, after) == {"eval/token_mark": 1000.0, "eval/flops_mark": 2e6}
    flops_log = EvalSpec(log_from=1e6, log_per_decade=1, log_axis="flops")
    assert due_marks(flops_log, before, after) == {"eval/flops_mark": 1e6}


def test_a_log_cadence_evaluates_at_the_hand_computed_steps():
    tracker = MemoryTracker()
    s = spec(0, eval=dataclasses.replace(spec(0).eval, log_from=150, log_per_decade=2))
    train(s, tracker=tracker, loaded=loaded(), engine=scripted(always_truncated))
    # tokens 192·step; marks 150, 474.3, 1500: crossed at steps 1 (150) and 3 (474.3 < 576);
    # 1500 is crossed at step 8, after the budget
    assert eval_steps(tracker) == [1, 3, 7]
    assert [m for _, m in tracker.history("eval/token_mark")] == pytest.approx([150, 150 * 10**0.5])


def test_a_flops_cadence_evaluates_where_the_logged_flops_cross_it():
    tracker = MemoryTracker()
    s = spec(0, eval=dataclasses.replace(spec(0).eval, every_flops=1.5e8))
    train(s, tracker=tracker, loaded=loaded(), engine=scripted(always_truncated))
    flops = [0.0] + [v for _, v in tracker.history("perf/model_flops")]
    crossed = [i for i in range(1, 7) if flops[i] // 1.5e8 > flops[i - 1] // 1.5e8]
    assert crossed and eval_steps(tracker) == [*crossed, 7]
    marks = [m for _, m in tracker.history("eval/flops_mark")]
    assert marks == [flops[i] // 1.5e8 * 1.5e8 for i in crossed]


def test_compute_cadence_settings_are_checked():
    problems = EvalSpec(every_flops=-1, log_from=-2, log_per_decade=0, log_axis="gpu").problems()
    for word in ("every_flops=-1", "log_from=-2", "log_per_decade=0", "log_axis='gpu'"):
        assert any(word in p for p in problems), word


def test_every_tokens_must_not_be_negative():
    assert any("every_tokens=-1 must be >= 0" in p for p in EvalSpec(every_tokens=-1).problems())
    with pytest.raises(ConfigError, match="every_tokens"):
        spec(-1)


def _comparable(tracker: MemoryTracker):
    return [
        (s, {k: v for k, v in m.items() if not k.startswith("perf/") and "wall" not in k})
        for s, m in tracker.metrics
    ]


def test_resume_after_kill_evaluates_at_the_same_token_marks(tmp_path):
    s = spec(200, algorithm=Algorithm(minibatches=2), checkpoint_every=1)
    full = MemoryTracker()
    train(s, tracker=full, run_dir=tmp_path / "full", loaded=loaded(), engine=scripted(mixed))

    def kill_at_3(step, total, metrics):
        if step == 3:
            raise KeyboardInterrupt

    cut = MemoryTracker()
    with pytest.raises(KeyboardInterrupt):
        train(
            s,
            tracker=cut,
            run_dir=tmp_path / "cut",
            loaded=loaded(),
            engine=scripted(mixed),
            progress=kill_at_3,
        )
    train(s, tracker=cut, run_dir=tmp_path / "cut", loaded=loaded(), engine=scripted(mixed))
    marks = [step for step, _ in full.history("eval/token_mark")]
    assert any(step > 3 for step in marks) and len(marks) < BUDGET.max_steps - 1
    assert _comparable(cut) == _comparable(full)


def test_tokens_per_correct_is_eval_tokens_over_correct_samples():
    # one token per character, the stop "\n" included; answers 3, 7, 11
    script = {
        "Q: 1+2\nA:": [" =3\n", " =3333\n"],  # 4 tokens correct, 7 wrong
        "Q: 3+4\nA:": [" =7\n", " =7\n"],  # 4 and 4, both correct
        "Q: 5+6\nA:": [" =0\n", " =12\n"],  # 4 and 5, both wrong
    }
    eval_spec = EvalSpec(n_samples=2, ks=(1, 2), max_problems=3)
    metrics, _ = evaluate(
        ScriptedEngine(script), ToyTask(), ToyTemplate(), eval_spec, max_new_tokens=16, seed=0
    )
    assert metrics["eval/tokens_per_correct"] == pytest.approx((4 + 7 + 4 + 4 + 4 + 5) / 3)
    assert "eval/acc_per_1k_tokens" not in metrics
    none_right = {prompt: [" =0\n"] for prompt in script}
    metrics, _ = evaluate(
        ScriptedEngine(none_right), ToyTask(), ToyTemplate(), eval_spec, max_new_tokens=16, seed=0
    )
    assert metrics["eval/pass_at_1"] == 0.0 and "eval/tokens_per_correct" not in metrics
