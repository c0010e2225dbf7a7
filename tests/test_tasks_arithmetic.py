"""Arithmetic task: deterministic disjoint splits, worked solutions, verifier, layouts."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from ablate.base.errors import ConfigError
from ablate.tasks import CHARSET, get_task
from ablate.tasks.arithmetic import LEVELS, Level, chain
from ablate.tasks.templates import get_template, template_names

PLAIN = get_template("plain")


def small(**options):
    return get_task("arithmetic", n_train=2000, n_eval=200, **options)


def test_chain_is_the_hand_computed_partial_sums():
    assert chain((28, 65, 18)) == "28+65=93;93+18=111;"
    assert chain((1, 2, 3, 4)) == "1+2=3;3+3=6;6+4=10;"


def test_generation_is_deterministic_and_seed_dependent():
    a, b, c = small(seed=3), small(seed=3), small(seed=4)
    for split in ("train", "eval"):
        assert a.problems(split) == b.problems(split)
    assert [p.id for p in a.problems("eval")] != [p.id for p in c.problems("eval")]


def test_splits_are_disjoint_and_ids_unique():
    task = small()
    train, eval_ = task.problems("train"), task.problems("eval")
    assert len(train) == 2000 and len(eval_) == 200
    multisets = lambda ps: {tuple(sorted(p.data["operands"])) for p in ps}  # noqa: E731
    assert not multisets(train) & multisets(eval_)
    ids = [p.id for p in train + eval_]
    assert len(set(ids)) == len(ids)


def test_eval_split_does_not_depend_on_n_train():
    assert small().problems("eval") == get_task("arithmetic", n_train=10, n_eval=200).problems(
        "eval"
    )


def test_answer_is_the_sum_of_the_question():
    for p in small().problems("eval"):
        assert int(p.answer) == sum(int(x) for x in p.question.split("+"))


@pytest.mark.parametrize("difficulty", sorted(LEVELS))
def test_difficulty_sets_operand_count_and_range(difficulty):
    level = LEVELS[difficulty]
    problems = small(difficulty=difficulty).problems("train")
    counts = Counter(len(p.data["operands"]) for p in problems)
    assert set(counts) == set(level.counts)
    share = counts[level.counts[0]] / len(problems)
    assert level.weights[0] - 0.08 < share <= level.weights[0] + 0.08
    values = [x for p in problems for x in p.data["operands"]]
    assert min(values) >= level.low and max(values) <= level.high


@pytest.mark.parametrize("layout", ["pre", "tail"])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("name", template_names())
def test_sampled_solutions_verify_correct_under_every_template(layout, shuffle, name):
    template = get_template(name)
    task = small(layout=layout, shuffle_steps=shuffle)
    rng = random.Random(0)
    for p in task.problems("eval")[:50]:
        completion = task.sample_solution(p, template, rng)
        verdict = task.verify(p, completion, template)
        assert verdict.correct and verdict.reward == 1.0 and verdict.error is None
        assert verdict.mismatch is (False if layout == "tail" else verdict.mismatch)
        assert verdict.mismatch is (None if "ck:" not in completion else False)
        assert set(template.render(p.question) + completion) <= set(CHARSET)


def test_pre_layout_writes_the_check_at_the_controlled_rate_before_the_answer():
    task, rng = small(layout="pre", check_rate=0.25), random.Random(1)
    lines = [(p, task.sample_solution(p, PLAIN, rng)) for p in task.problems("train")]
    with_check = [c for _, c in lines if "ck:" in c]
    assert 0.21 < len(with_check) / len(lines) < 0.29
    assert all(c.index("ck:") < c.index("####") for c in with_check)
    assert all(task.verify(p, c, PLAIN).self_check == ("ck:" in c) for p, c in lines[:200])
    assert max(len(c) for _, c in lines) <= 76  # " " + 32 + "ck:" + 32 + "#### 396", by hand


def test_tail_layout_has_mandatory_check_then_answer_then_optional_tail():
    task, rng = small(layout="tail", check_rate=0.25, max_tail=2), random.Random(2)
    lines = [task.sample_solution(p, PLAIN, rng) for p in task.problems("train")]
    assert all(c.index("ck:") < c.index("####") for c in lines)
    tails = Counter(c.count("rk:") for c in lines)
    assert set(tails) <= {0, 1, 2}
    assert 0.21 < (tails[1] + tails[2]) / len(lines) < 0.29  # first tail line at rate 0.25
    assert all(c.index("####") < c.index("rk:") for c in lines if "rk:" in c)
    # longest by hand: " " + 3 steps "99+99=198;198+99=297;297+99=396;" (32) + "ck:" + 32
    # + "#### 396" (8) + 2 x "\nrk:99+99+99+99=396" (19) = 114
    assert max(len(c) for c in lines) <= 114


def test_tail_is_reward_neutral_and_flagged_as_self_check():
    task = small(layout="tail")
    p = task.problems("eval")[0]
    ops = p.data["operands"]
    base = f" {chain(ops)}ck:{chain(ops[::-1])}#### {p.answer}"
    plain_v = task.verify(p, base, PLAIN)
    tail_v = task.verify(p, base + "\nrk:1+2=999\nrk:junk", PLAIN)
    assert plain_v.reward == tail_v.reward == 1.0
    assert (plain_v.self_check, tail_v.self_check) == (False, True)


def test_r1_has_no_tail_after_its_stop_string():
    task, r1, rng = small(layout="tail", check_rate=1.0), get_template("r1"), random.Random(0)
    for p in task.problems("eval")[:20]:
        assert task.sample_solution(p, r1, rng).endswith("</answer>")


def test_shuffle_steps_raises_the_number_of_distinct_solutions():
    p = small().problems("eval")[0]
    fixed, shuffled = small(check_rate=1.0), small(check_rate=1.0, shuffle_steps=True)
    rng = random.Random(0)
    assert len({fixed.sample_solution(p, PLAIN, rng) for _ in range(50)}) == 1
    assert len({shuffled.sample_solution(p, PLAIN, rng) for _ in range(50)}) > 3


def test_verifier_on_hand_written_completions():
    task = small()
    p = next(p for p in task.problems("eval") if p.question.count("+") == 2)
    a, b, c = p.data["operands"]
    total = a + b + c
    main = f" {a}+{b}={a + b};{a + b}+{c}={total};"
    wrong_check = f"ck:{c}+{b}={b + c};{b + c}+{a}={total + 1};"
    v = task.verify(p, main + wrong_check + f"#### {total}", PLAIN)
    assert v.correct and v.self_check and v.mismatch is True
    v = task.verify(p, main + f"#### {total + 1}", PLAIN)
    assert (v.correct, v.reward, v.format_ok, v.error) == (False, 0.0, True, None)
    v = task.verify(p, main + f"the answer is {total}", PLAIN)
    assert (v.correct, v.format_ok, v.answer) == (False, False, None)
    assert not task.verify(p, main + f"#### {total}.5", PLAIN).format_ok


def test_format_reward_is_separate_and_explicit():
    task = small(reward_format=0.1)
    p = task.problems("eval")[0]
    assert task.verify(p, f"#### {p.answer}", PLAIN).reward == pytest.approx(1.1)
    assert task.verify(p, f"#### {int(p.answer) + 1}", PLAIN).reward == pytest.approx(0.1)
    assert task.verify(p, "no marker", PLAIN).reward == 0.0


@pytest.mark.parametrize(
    "options, fragment",
    [
        ({"layout": "middle"}, "layout"),
        ({"difficulty": "brutal"}, "medium"),
        ({"check_rate": 1.5}, "check_rate"),
        ({"n_eval": -1}, "n_eval"),
        ({"colour": "red"}, "layout"),
    ],
)
def test_bad_options_raise_config_error_naming_the_fix(options, fragment):
    with pytest.raises(ConfigError, match=fragment):
        get_task("arithmetic", **options).problems("eval")


def test_impossible_split_sizes_raise_config_error(monkeypatch):
    monkeypatch.setitem(LEVELS, "tiny", Level(counts=(2,), weights=(1.0,), low=1, high=5))
    with pytest.raises(ConfigError, match="distinct"):  # only 15 multisets of 2 operands in 1-5
        get_task("arithmetic", difficulty="tiny", n_train=10, n_eval=10).problems("train")


def test_subsets_select_measured_problems_and_refuse_other_options():
    from ablate.base.errors import ConfigError
    from ablate.tasks import get_task

    options = {"layout": "pre", "difficulty": "medium", "n_eval": 2000}
    every = get_task("arithmetic", **options)
    easy = get_task("arithmetic", subset="easy", **options)
    hard = get_task("arithmetic", subset="hard", **options)
    for split in ("train", "eval"):
        ids = {p.id for p in every.problems(split)}
        e, h = {p.id for p in easy.problems(split)}, {p.id for p in hard.problems(split)}
        assert e and h and e <= ids and h <= ids and not e & h
    assert len(easy.problems("eval")) == 264 and len(hard.problems("eval")) == 313
    with pytest.raises(ConfigError, match="n_eval=256 \\(measured: 2000\\)"):
        get_task("arithmetic", subset="easy", layout="pre").problems("train")
    with pytest.raises(ConfigError, match="subset"):
        get_task("arithmetic", subset="medium")
