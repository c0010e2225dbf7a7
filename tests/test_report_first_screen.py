"""The report's first screen reads as a paper's results paragraph (issue 44): the estimand, the
training budget, the verdicts and controls, the forest plot and the compact headline; every
other section below a fold (HTML `<details>`, the Markdown appendix) in the declared order.
One number style throughout: decimals by the interval's width, thousands grouped, true minus
signs, p-values floored at `< 1e-6`, variance intervals clipped at 0, HTML numbers
right-aligned and `code` rendered."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ablate.baselines import baseline
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, Optim
from ablate.report.claims import sentences
from ablate.report.data import numbers
from ablate.report.data.table import Table
from ablate.report.render import build, formats, opening, sections, tables
from ablate.report.render.blocks import Fold, Heading, walk
from ablate.report.stats import contrasts as cx
from ablate.report.stats.inference import Estimate
from ablate.testing import study_data

REF = dataclasses.replace(baseline("grpo"), kl_coef=0.0, minibatches=4)
ALGOS = {"grpo": REF, "better": dataclasses.replace(REF, clip_high=0.28)}


@pytest.fixture(scope="module")
def data():
    runs = []
    for s in range(4):
        for arm, lift in (("grpo", 0.0), ("better", 0.1)):
            curves = {
                "eval/pass_at_1": {0: 0.5, 5: 0.5 + lift / 2 + 0.01 * s, 10: 0.5 + lift + 0.01 * s},
                "budget/generated_tokens": {5: 6_000, 10: 12_000 + 1_000 * (arm == "better")},
            }
            runs.append((arm, "m", s, curves))
    plain = study_data(runs, algorithms=ALGOS, reference="grpo", equivalence_margin=0.05)
    return dataclasses.replace(
        plain,
        budget=Budget(max_steps=1_000, prompts_per_step=8, group_size=16, max_new_tokens=80),
        optim=Optim(lr=3e-5),
        eval_spec=EvalSpec(every=5, n_samples=2),
    )


@pytest.fixture(scope="module")
def written(data, tmp_path_factory):
    folder = build.write_report(data, tmp_path_factory.mktemp("report"))
    return folder, (folder / "report.md").read_text(), (folder / "report.html").read_text()


def test_the_opening_states_the_training_budget(data):
    said = opening.training_budget(data)
    assert said.startswith("Training budget: 1,000 RL steps per trial of 8 prompts × 16 samples")
    assert "learning rate 3e-5" in said and "4 seeds per arm" in said
    assert "12,000 tokens generated in training per grpo trial" in said
    assert "(arms' means 12,000–13,000)" in said  # `better` generated more
    assert opening.training_budget(dataclasses.replace(data, budget=None)) == ""


def test_a_tuned_study_states_each_arms_learning_rate_and_an_eval_at_the_end_only(data):
    import pandas as pd

    tuning = pd.DataFrame(
        [
            {
                "arm": "grpo",
                "number": 0,
                "score": 0.5,
                "state": "finished",
                "chosen": True,
                "lr": 1.60519e-5,
            },
            {
                "arm": "better",
                "number": 0,
                "score": 0.6,
                "state": "finished",
                "chosen": True,
                "lr": 2.7e-5,
            },
            {
                "arm": "better",
                "number": 1,
                "score": 0.4,
                "state": "finished",
                "chosen": False,
                "lr": 9e-5,
            },
        ]
    )
    eval_spec = EvalSpec(at_start=False, n_samples=2)
    said = opening.training_budget(dataclasses.replace(data, tuning=tuning, eval_spec=eval_spec))
    assert "learning rate tuned per arm (grpo 1.61e-5, better 2.7e-5)" in said
    assert "learning rate 3e-5" not in said
    assert opening._start_and_end(eval_spec) == "at the end"  # the final eval only
    assert opening._start_and_end(EvalSpec()) == "at the start and the end"


def test_the_first_screen_is_the_results_paragraph_and_the_rest_is_below_the_fold(data, written):
    folder, md, text = written
    page = build.study_page(data, tables.build_tables(data), sorted(folder.glob("figures/*.png")))
    (fold,) = [b for b in page.blocks if isinstance(b, Fold)]
    assert page.blocks[-1] is fold
    above = [b.text for b in walk(page.blocks[:-1]) if isinstance(b, Heading)]
    first = [s.heading for s in sections.SECTIONS if s.screen == sections.FIRST_SCREEN]
    assert above[1:] == first  # the title, then the first screen's sections only
    below = [b.text for b in walk(fold.blocks) if isinstance(b, Heading)]
    declared = [s.heading for s in sections.SECTIONS if s.screen == sections.APPENDIX]
    assert below == [h for h in declared if h in below] and len(below) >= 4
    # the budget before the findings, the findings before the fold, in both files
    for page_text, fold_mark in ((md, f"# {build.APPENDIX}"), (text, "<details")):
        budget, findings = page_text.index("Training budget:"), page_text.index("Findings")
        assert budget < findings < page_text.index(fold_mark)
        assert page_text.index("Different (primary") < page_text.index(fold_mark)
        assert page_text.index(fold_mark) < page_text.index("Arms and what they change")
    assert text.count("<details") == 1 and "</details></body>" in text


def test_a_verdict_changed_by_the_other_reading_is_named_either_way(data):
    (row,) = cx.headline_contrasts(data)
    equivalent = dataclasses.replace(row, verdict=cx.EQUIVALENT, tokens=60_000.0)
    inconclusive = dataclasses.replace(equivalent, verdict=cx.INCONCLUSIVE)
    different = dataclasses.replace(equivalent, verdict=cx.DIFFERENT)
    for steps, tokens in ((equivalent, inconclusive), (inconclusive, different)):
        (said,) = sentences._token_disagreements([steps], [tokens])
        assert f"is {steps.verdict} at equal steps but {tokens.verdict} at equal generated" in said
        assert "(60,000)" in said
    assert sentences._token_disagreements([equivalent], [equivalent]) == []


@pytest.mark.parametrize(
    ("value", "low", "high", "text"),
    [
        (-0.004, -0.024, 0.016, "−0.004 [−0.024, +0.016]"),
        (-0.267, -0.369, -0.164, "−0.27 [−0.37, −0.16]"),
        (-3.9e-4, -0.024, 0.023, "0.000 [−0.024, +0.023]"),  # no sign on what rounds to 0
        (61.6, 56.6, 66.6, "+61.6 [+56.6, +66.6]"),
        (1234.5, 900.0, 1500.0, "+1,234 [+900, +1,500]"),
    ],
)
def test_an_estimate_shows_the_decimals_its_interval_supports(value, low, high, text):
    assert numbers.estimate(value, low, high, sign=True) == text
    assert "e-" not in text and "-" not in text  # no scientific notation, true minus signs


def test_p_values_are_floored_and_variances_never_below_zero():
    assert numbers.p_value(1.63e-94) == "< 1e-6" and numbers.p_value(0.0393) == "0.039"
    assert numbers.p_value(2e-6) == "0.0000020"
    assert formats._text(Estimate(1e-4, -2e-5, 2.2e-4, 5), column="token-ratio var") == (
        "0.00010 [0.00000, 0.00022]"
    )
    assert formats._text(Estimate(0.01, -0.02, 0.04, 5), column="Δ pass@1").startswith("0.01")
    assert "−0.02" in formats._text(Estimate(0.01, -0.02, 0.04, 5), column="Δ pass@1")


def test_html_tables_right_align_numbers_and_render_code():
    table = Table("Arms against `grpo`.", [{"arm": "`dapo`", "Δ": -0.5, "p (Holm)": 3e-9}])
    out = formats.to_html(table)
    assert "`" not in out and "<code>grpo</code>" in out and "<code>dapo</code>" in out
    assert re.search(r"<td class='num'>−0\.500</td>", out)
    assert "<td class='num'>&lt; 1e-6</td>" in out and "<td><code>dapo" in out
