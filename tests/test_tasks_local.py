"""GSM8K-style and MATH-style tasks read from local files (offline)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pandas as pd
import pytest

from ablate.base.errors import ConfigError
from ablate.tasks import get_task
from ablate.tasks.math_check import CPU_GRACE, shared_verifier
from ablate.tasks.templates import get_template

FIXTURES = Path(__file__).parent / "fixtures"
GSM8K = FIXTURES / "gsm8k_small.jsonl"
MATH = FIXTURES / "math_small.jsonl"
PLAIN, QWEN = get_template("plain"), get_template("qwen_math")


def all_problems(task):
    return task.problems("train") + task.problems("eval")


def test_gsm8k_reads_reference_answers_after_the_marker():
    task = get_task("gsm8k", path=str(GSM8K), n_eval=3)
    answers = {p.question.split()[0]: p.answer for p in all_problems(task)}
    assert answers["Mia"] == "2000"  # '#### 2,000' without the thousands separator
    assert answers["The"] == "-4" and answers["Lena"] == "72"
    assert len(task.problems("train")) == 5 and len(task.problems("eval")) == 3


def test_gsm8k_split_is_deterministic_disjoint_and_seeded():
    a, b = (get_task("gsm8k", path=str(GSM8K), n_eval=3, seed=0) for _ in range(2))
    assert a.problems("eval") == b.problems("eval")
    assert not {p.id for p in a.problems("train")} & {p.id for p in a.problems("eval")}
    evals = {
        tuple(p.id for p in get_task("gsm8k", path=str(GSM8K), n_eval=3, seed=s).problems("eval"))
        for s in range(6)
    }
    assert len(evals) > 1


def test_gsm8k_parquet_and_eval_path(tmp_path):
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    pd.DataFrame(rows[:5]).to_parquet(tmp_path / "train.parquet")
    pd.DataFrame(rows[4:]).to_parquet(tmp_path / "test.parquet")  # row 4 in both files
    task = get_task(
        "gsm8k", path=str(tmp_path / "train.parquet"), eval_path=str(tmp_path / "test.parquet")
    )
    assert len(task.problems("eval")) == 4
    assert len(task.problems("train")) == 4  # the shared row is dropped from train
    assert not {p.id for p in task.problems("train")} & {p.id for p in task.problems("eval")}


@pytest.mark.parametrize(
    "completion, correct, format_ok",
    [
        ("so 2,000 meters\n#### 2000", True, True),
        ("#### 2,000.00", True, True),
        ("#### $2000.", True, True),
        ("#### 2001", False, True),
        ("#### two thousand", False, True),
        ("2000", False, False),
    ],
)
def test_gsm8k_numeric_comparison(completion, correct, format_ok):
    task = get_task("gsm8k", path=str(GSM8K), n_eval=3)
    problem = next(p for p in all_problems(task) if p.answer == "2000")
    v = task.verify(problem, completion, PLAIN)
    assert (v.correct, v.format_ok, v.error) == (correct, format_ok, None)


def test_missing_file_or_columns_raise_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        get_task("gsm8k", path=str(tmp_path / "nope.jsonl"))
    with pytest.raises(ConfigError, match=r"\.jsonl"):
        get_task("gsm8k", path=str(GSM8K.with_suffix(".csv")))
    with pytest.raises(ConfigError, match="path"):
        get_task("math")
    with pytest.raises(ConfigError, match="question"):
        get_task("gsm8k", path=str(MATH), n_eval=2).problems("train")


@pytest.fixture(scope="module")
def math_task():
    return get_task("math", path=str(MATH), n_eval=2, time_limit=1.0)


def math_problem(task, answer):
    return next(p for p in all_problems(task) if p.answer == answer)


def test_math_reference_is_the_last_box_and_unboxed_rows_are_skipped(math_task):
    answers = {p.answer for p in all_problems(math_task)}
    assert "\\{-1, 1\\}" in answers and "5\\sqrt{2}" in answers and "\\frac{3}{4}" in answers
    assert len(answers) == 7  # 8 rows, one without \boxed{}


@pytest.mark.parametrize(
    "pred, correct",
    [
        ("\\dfrac{3}{4}", True),  # string normalisation
        ("0.75", True),  # math-verify
        ("3/4", True),
        ("\\frac{6}{8}", True),
        ("\\frac{1}{2}", False),
    ],
)
def test_math_answers_checked_by_normalisation_then_math_verify(math_task, pred, correct):
    v = math_task.verify(math_problem(math_task, "\\frac{3}{4}"), f"so \\boxed{{{pred}}}", QWEN)
    assert (v.correct, v.error) == (correct, None)


def test_math_verify_works_off_the_main_thread(math_task):
    problem = math_problem(math_task, "\\frac{3}{4}")
    out = []
    thread = threading.Thread(
        target=lambda: out.append(math_task.verify(problem, "\\boxed{0.75}", QWEN))
    )
    thread.start()
    thread.join(30)
    assert out and out[0].correct and out[0].error is None


@pytest.mark.parametrize(
    "pred",
    ["9**9**9**9", "10^{" + "9" * 400 + "}", "(" * 400, "\\frac{1}{" * 50, "∞ ÷ 日本 \u202e"],
)
def test_math_adversarial_answers_return_a_verdict_in_time(math_task, pred):
    problem = math_problem(math_task, "81")
    math_task.verify(problem, "\\boxed{1}", QWEN)  # (re)start the worker outside the limit
    v = math_task.verify(problem, f"\\boxed{{{pred}}}", QWEN)
    assert not v.correct and v.reward == 0.0
    assert v.error in (None, "timeout") or v.error.startswith("math-verify")
    if v.error != "timeout":  # math-verify answered: within its CPU seconds (load-independent)
        assert shared_verifier().last_cpu_seconds <= math_task.time_limit + CPU_GRACE
