"""The best-elicited base: parses, few-shot prompts, the grid and its choice, pass rates from one
set of completions, the report's gain over the best base and the format share, by hand."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from ablate.base.errors import ConfigError, StudyError
from ablate.base.records import SamplingParams
from ablate.factors.algorithms import Algorithm
from ablate.report.render import elicited as render
from ablate.report.stats import elicited as el
from ablate.study import Budget, ElicitSpec, PassKSpec, Study, arm
from ablate.tasks import get_task
from ablate.tasks.templates import PARAGRAPH, get_template, parsed, with_shots
from ablate.testing import ScriptedEngine, study_data, zoo_model_built
from ablate.trial.elicitation import (
    Prompting,
    best,
    grid,
    pass_rates,
    prompt_template,
    selection_problems,
)

PLAIN = get_template("plain")


# --- parses -----------------------------------------------------------------------------------
def test_lenient_parse_falls_back_to_a_boxed_answer_then_the_last_number():
    lenient = parsed(PLAIN, "lenient")
    assert PLAIN.extract("so it is 42") is None
    assert lenient.extract("so it is 42") == "42"
    assert lenient.extract("#### 7\nlater 9") == "7"  # the template's own format first
    assert lenient.extract("\\boxed{5} then 6") == "5"
    assert lenient.extract("no number here") is None
    assert parsed(PLAIN, "strict") is PLAIN
    with pytest.raises(ConfigError, match="unknown answer parse 'fuzzy'"):
        parsed(PLAIN, "fuzzy")


def test_task_verify_reads_the_answer_with_the_parse_asked_for():
    task = get_task("arithmetic")
    problem = task.problems("eval")[0]
    completion = f" the sum is {problem.answer}"
    assert not task.verify(problem, completion, PLAIN).correct
    assert task.verify(problem, completion, PLAIN, "lenient").correct
    assert task.verify(problem, completion, PLAIN, parse="strict").format_ok is False


# --- few-shot prompts -------------------------------------------------------------------------
def test_with_shots_writes_each_example_in_the_template_format_before_the_question():
    shot = with_shots(PLAIN, [("1+2", " #### 3"), ("4+4", " #### 8")])
    assert shot.render("5+5") == (
        "Question: 1+2\nAnswer: #### 3\n\nQuestion: 4+4\nAnswer: #### 8\n\nQuestion: 5+5\nAnswer:"
    )
    assert shot.name == "plain+2shot" and PARAGRAPH in shot.stop
    assert shot.extract(" #### 10") == "10"
    assert with_shots(PLAIN, []) is PLAIN


def test_examples_come_from_train_after_the_selection_problems():
    task = get_task("arithmetic")
    selection = selection_problems(task, 5)
    assert selection == task.problems("train")[:5]
    template = prompt_template(task, Prompting("plain", 2, 1.0), after=5, seed=0)
    prompt = template.render("1+1")
    train = task.problems("train")
    assert train[5].question in prompt and train[6].question in prompt
    assert not any(p.question in prompt for p in selection)
    assert not any(f" {p.question}\n" in prompt for p in task.problems("eval"))
    # each example is a worked solution ending in the template's answer
    assert f"#### {train[5].answer}" in prompt


# --- the grid and the choice ------------------------------------------------------------------
def test_grid_puts_the_eval_temperature_and_the_strict_parse_first():
    points = grid(["plain", "plain_q", "plain"], [0, 1], [0.6, 1.0], ["lenient"], 1.0)
    assert points[0] == Prompting("plain", 0, 1.0, "strict")
    assert points[1] == Prompting("plain", 0, 1.0, "lenient")
    assert len(points) == 2 * 2 * 2 * 2  # duplicates dropped
    assert {p.temperature for p in points} == {1.0, 0.6}
    with pytest.raises(ConfigError, match="unknown answer parse"):
        grid(["plain"], [0], [], ["fuzzy"], 1.0)


def test_best_takes_the_highest_score_and_the_first_in_grid_order_on_a_tie():
    a, b, c = (Prompting("plain", k, 1.0) for k in range(3))
    assert best({a: 0.5, b: 0.7, c: 0.7}) == b
    assert best({a: 0.5, b: 0.7, c: 0.9}, lambda p: p.shots < 2) == b
    assert best({a: float("nan"), b: 0.1}) == b
    with pytest.raises(ConfigError, match="nothing to choose"):
        best({a: 0.5}, lambda p: False)


def test_pass_rates_verify_one_set_of_completions_under_every_parse():
    task = get_task("arithmetic")
    problems = task.problems("eval")[:2]
    answers = {PLAIN.render(p.question): p.answer for p in problems}
    first = problems[0].answer

    def script(prompt, j, _call):  # sample 0 strict-right, 1 only leniently right, 2 wrong
        return [f" #### {answers[prompt]}", f" it is {answers[prompt]}", " #### -1"][j]

    engine = ScriptedEngine(script)
    rates = pass_rates(
        engine, task, problems, PLAIN, ["strict", "lenient"], SamplingParams(max_new_tokens=80), n=3
    )
    np.testing.assert_allclose(rates["strict"], [1 / 3, 1 / 3])
    np.testing.assert_allclose(rates["lenient"], [2 / 3, 2 / 3])
    assert engine.calls == 1 and first  # sampled once for both parses


# --- the study declares it, checked before any compute ----------------------------------------
@pytest.mark.parametrize(
    ("elicit", "message"),
    [
        (ElicitSpec(parses=("fuzzy",)), "unknown parse 'fuzzy'"),
        (ElicitSpec(shots=(-1,)), "shots=(-1,) must be integers >= 0"),
        (ElicitSpec(templates=("nope",)), "unknown template 'nope'"),
        (ElicitSpec(temperatures=(0.0,)), "temperatures=(0.0,) must be finite numbers > 0"),
        (True, "must be an ElicitSpec"),
    ],
)
def test_a_bad_elicitation_grid_is_a_study_error(elicit, message):
    with pytest.raises(StudyError, match=re.escape(message)):
        Study(name="s", base_models=["m"], arms=[arm("g", "grpo")], passk=PassKSpec(elicit=elicit))


# --- the report -------------------------------------------------------------------------------
def _elicitation(rates: dict[str, list[float]], template="plain") -> pd.DataFrame:
    rows = []
    for role, values in rates.items():
        for j, rate in enumerate(values):
            rows.append(
                dict(
                    model="m",
                    split="eval",
                    role=role,
                    for_template=template if role in ("as_trained", "lenient") else "*",
                    template="plain_q" if role == "best" else "plain",
                    shots=1 if role == "best" else 0,
                    temperature=0.6 if role == "best" else 1.0,
                    parse="lenient" if role in ("best", "lenient") else "strict",
                    problem_id=f"p{j}",
                    rate=rate,
                    n_samples=4,
                )
            )
    return pd.DataFrame(rows)


def test_gain_over_a_base_is_paired_by_problem():
    final = pd.DataFrame(
        [[1.0, 0.5, 0.25], [0.5, 0.0, 0.75], [0.75, 0.5, 0.0]], columns=["p0", "p1", "p2"]
    )
    base = pd.Series({"p1": 0.5, "p0": 0.25, "p9": 1.0})  # p2 and p9 not shared: left out
    est = el.gain_over(final, base)
    # (1 − .25, .5 − .5; .5 − .25, 0 − .5; .75 − .25, .5 − .5) → mean 1.0 / 6
    assert est.value == pytest.approx(1 / 6)
    assert est.low < est.value < est.high and est.n == 3
    one_seed = el.gain_over(final.iloc[:1], base)
    assert one_seed.value == pytest.approx(0.375) and np.isnan(one_seed.low)


def test_shares_of_the_gain_by_hand():
    base = el.elicited_base(
        _elicitation({"as_trained": [0.2, 0.2], "lenient": [0.3, 0.3], "best": [0.5, 0.4]}),
        "m",
        "plain",
    )
    assert base.mean("best") == pytest.approx(0.45)
    assert base.labels["best"] == "plain_q + 1-shot, T=0.6, lenient"
    shares = el.shares(0.6, base)  # gain over as trained = 0.4
    assert shares["lenient"] == pytest.approx(0.25)
    assert shares["best"] == pytest.approx(0.625)
    assert np.isnan(shares["best_prompt"])  # not measured
    assert all(np.isnan(v) for v in el.shares(0.1, base).values())  # no gain: no share
    assert el.elicited_base(_elicitation({"best": [1.0]}), "m", "other") is not None  # "*"
    assert el.elicited_base(_elicitation({"as_trained": [1.0]}), "m", "other") is None


def test_the_report_table_and_headline_column_read_the_gain_over_the_best_base():
    algos = {"grpo": Algorithm()}
    runs = [("grpo", "m", s, {"eval/pass_at_1": [0.2, 0.6 + 0.1 * s]}) for s in range(3)]
    outcomes = {("grpo", s): [[1, 1], [1, 0], [0, s % 2]] for s in range(3)}  # p0, p1, p2
    data = study_data(runs, algorithms=algos, reference="grpo", samples=outcomes)
    rates = {"as_trained": [0.5, 0.25, 0.0], "lenient": [0.5, 0.5, 0.0], "best": [0.75, 0.5, 0.0]}
    data = type(data)(**{**data.__dict__, "elicitation": _elicitation(rates)})
    table = render.elicited_table(data)
    (row,) = table.rows
    # final per-problem rates: p0 1, p1 .5, p2 (0, .5, 0) → gain over best per seed and problem
    expected = np.mean([[0.25, 0.0, x] for x in (0.0, 0.5, 0.0)])
    assert row[render.GAIN_OVER_BEST].value == pytest.approx(expected)
    assert row["best elicited"] == pytest.approx(0.25 + 0.5 / 3)
    assert row["step 0"] == pytest.approx(0.2) and row["final"] == pytest.approx(0.7)
    # lenient share: (0.333 − 0.25) / (0.7 − 0.25)
    assert row["share: lenient parse"] == f"{100 * (1 / 3 - 0.25) / 0.45:.0f}%"
    gains = render.gains_over_best(data)
    assert gains[("grpo", "m", "plain")].value == pytest.approx(expected)


@pytest.mark.parametrize("seeds", [3, 5])
def test_gain_over_a_base_interval_covers_the_task_level_gain(seeds):
    """Simulated studies: problems drawn from a task, a base measured once per problem with n
    samples, an arm's final rates per seed and problem; the 95% crossed interval of final − base
    covers the task's mean gain in 92–98.5% of 400 studies (Monte Carlo SE 0.011)."""
    rng = np.random.default_rng(7)
    problems, k_final, k_base, reps = 64, 2, 8, 400

    def draw(j):  # the task: a base probability and the arm's gain per problem
        base = rng.beta(2, 3, j)
        return base, np.clip(base + 0.1 + rng.normal(0, 0.1, j), 0, 1)

    pop_base, pop_final = draw(400_000)
    truth = float((pop_final - pop_base).mean())
    covered = 0
    for _ in range(reps):
        base, final = draw(problems)
        shift = rng.normal(0, 0.03, (seeds, 1))  # training luck per seed
        rates = rng.binomial(k_final, np.clip(final[None, :] + shift, 0, 1)) / k_final
        measured = rng.binomial(k_base, base) / k_base
        names = [f"p{j}" for j in range(problems)]
        est = el.gain_over(pd.DataFrame(rates, columns=names), pd.Series(measured, index=names))
        covered += est.low <= truth <= est.high
    assert 0.92 <= covered / reps <= 0.985


def test_the_findings_say_each_arms_gain_over_the_best_elicited_base():
    algos = {"grpo": Algorithm()}
    runs = [("grpo", "m", s, {"eval/pass_at_1": [0.2, 0.75]}) for s in range(3)]
    outcomes = {("grpo", s): [[1, 1], [1, 0]] for s in range(3)}
    data = study_data(runs, algorithms=algos, reference="grpo", samples=outcomes)
    rates = {"as_trained": [0.5, 0.0], "lenient": [0.5, 0.25], "best": [0.75, 0.25]}
    data = type(data)(**{**data.__dict__, "elicitation": _elicitation(rates)})
    (sentence,) = render.elicited_sentences(data)
    # final 0.75 (p0 1, p1 .5), best 0.5: +0.25 for every seed, so no interval width
    assert sentence.startswith("grpo (m · plain): final pass@1 0.750, +0.250")
    assert "lenient parse 25%" in sentence and "best elicited 50%" in sentence
    from ablate.report.render.tables import report_findings

    found = report_findings(data)
    assert list(found)[-1] == "Caveats" and "Gains over the best-elicited base" in found


@pytest.mark.skipif(not zoo_model_built("rl_ready"), reason="zoo model rl_ready not built")
def test_prompts_that_leave_no_room_for_the_completion_are_refused_before_any_compute():
    from ablate.study.elicit_phase import check_elicitation

    def study(max_new_tokens, shots):
        return Study(
            name="s",
            base_models=["rl_ready"],
            arms=[arm("g", "grpo")],
            budget=Budget(max_new_tokens=max_new_tokens),
            passk=PassKSpec(elicit=ElicitSpec(templates=["plain", "none"], shots=shots)),
        )

    check_elicitation(study(80, (0, 1)), ["rl_ready"])  # fits the 192 positions
    with pytest.raises(ConfigError) as err:
        check_elicitation(study(120, (0, 1)), ["rl_ready"])
    message = str(err.value)
    assert "plain + 1-shot on rl_ready" in message and "none + 1-shot on rl_ready" in message
    assert "plain on" not in message  # the 0-shot prompts fit


def test_a_cached_elicitation_cut_short_is_measured_again(tmp_path):
    """A cache file cut mid-row (an old copy, a bad disk) is never read as a whole table."""
    from ablate.base import durable
    from ablate.base.durable import UnreadableFileWarning
    from ablate.study.elicit_phase import COLUMNS, _parse

    whole = _elicitation({"as_trained": [0.5, 0.25], "best": [1.0, 0.5]})[list(COLUMNS)]
    path = tmp_path / "elicit-x.csv"
    durable.write_atomic(path, whole.to_csv(index=False))
    assert len(durable.read_valid(path, _parse, "measured again")) == 4
    text = path.read_text()
    path.write_text(text[: text.rindex(",")])  # the last row loses its n_samples
    with pytest.warns(UnreadableFileWarning, match="measured again"):
        assert durable.read_valid(path, _parse, "measured again") is None
