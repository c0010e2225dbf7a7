"""Templates: rendering, planted-answer extraction, stop strings, variants, charset."""

from __future__ import annotations

import pytest

from ablate.base.errors import ConfigError
from ablate.tasks import CHARSET
from ablate.tasks.templates import (
    MILD_VARIANT,
    STRONG_VARIANT,
    TRAINING_TEMPLATE,
    get_template,
    last_boxed,
    template_names,
)

ANSWERS = ["42", "-7", "3.5", "1,234", "\\frac{3}{4}", "(44+35)+19"]


def test_every_named_template_exists():
    assert set(template_names()) >= {"none", "plain", "r1", "qwen_math"}
    assert {TRAINING_TEMPLATE, MILD_VARIANT, STRONG_VARIANT} <= set(template_names())


@pytest.mark.parametrize("name", template_names())
@pytest.mark.parametrize("answer", ANSWERS)
def test_planted_answer_is_extracted_after_reasoning(name, answer):
    t = get_template(name)
    completion = "First 3+4=7; then 12 more steps 99. " + t.write_answer(answer)
    assert t.extract(completion) == answer


@pytest.mark.parametrize("name", template_names())
def test_render_contains_question_and_no_answer(name):
    t = get_template(name)
    prompt = t.render("What is 6 times 7?")
    assert "6 times 7?" in prompt
    if name not in ("none", "r1"):  # none: last-number fallback; r1's prompt shows the tags
        assert t.extract(prompt) is None


@pytest.mark.parametrize("name", ["plain", "plain_q", "plain_spaced", "r1", "qwen_math"])
def test_missing_answer_format_extracts_none(name):
    assert get_template(name).extract("I think it is 42 but I am not sure") is None
    assert get_template(name).extract("") is None


def test_none_template_is_the_question_alone_and_falls_back_to_last_number():
    t = get_template("none")
    assert t.render("2+2") == "2+2"
    assert t.extract("2+2=4, and so 4+1=5") == "5"
    assert t.extract("") is None


def test_plain_answer_is_the_line_after_the_last_marker_so_a_tail_cannot_change_it():
    t = get_template("plain")
    assert t.render("28+65+18") == "Question: 28+65+18\nAnswer:"
    assert t.extract("#### 1\n#### 111\nrk:18+65+28=999") == "111"
    assert t.extract("#### \n") is None


def test_mild_variant_changes_only_the_prefix_and_strong_variant_spaces_operators():
    plain, mild, strong = (
        get_template(n) for n in (TRAINING_TEMPLATE, MILD_VARIANT, STRONG_VARIANT)
    )
    q = "28+65+18"
    assert plain.render(q).endswith(f"{q}\nAnswer:") and mild.render(q).endswith(f"{q}\nAnswer:")
    assert plain.render(q) != mild.render(q)
    assert strong.render(q) == "Question: 28 + 65 + 18\nAnswer:"
    assert plain.write_answer("5") == mild.write_answer("5") == strong.write_answer("5")


def test_r1_grades_inside_answer_tags_and_stops_at_close_tag():
    t = get_template("r1")
    assert t.stop == ("</answer>",)
    assert t.render("2+2").endswith("User: 2+2\nAssistant: <think>")
    assert t.write_answer("4").endswith("</answer>")
    assert t.extract("hmm </think> <answer> 4 </answer>") == "4"
    assert t.extract("<answer>4</answer> then <answer>5") == "4"  # unclosed tag is not graded
    assert t.extract("<answer>\\boxed{\\frac{1}{2}}</answer>") == "\\frac{1}{2}"
    assert t.extract("4</answer>") is None


def test_qwen_math_uses_chatml_system_turn_and_last_closed_box():
    t = get_template("qwen_math")
    prompt = t.render("2+2")
    assert prompt.startswith("<|im_start|>system\nPlease reason step by step, and put your final")
    assert "within \\boxed{}.<|im_end|>" in prompt and prompt.endswith("<|im_start|>assistant\n")
    assert t.extract("\\boxed{1} then \\boxed{\\frac{1}{\\sqrt{2}}}") == "\\frac{1}{\\sqrt{2}}"
    assert t.extract("\\boxed{7} and an unclosed \\boxed{8") == "7"


def test_last_boxed_is_linear_on_huge_inputs():
    assert last_boxed("\\boxed{" * 20_000) is None
    assert last_boxed("{" * 100_000 + "\\boxed{5}") == "5"


def test_unknown_template_lists_valid_names():
    with pytest.raises(ConfigError, match="plain"):
        get_template("chatty")


@pytest.mark.parametrize("name", template_names())
def test_template_text_is_printable_ascii(name):
    t = get_template(name)
    fixed = t.render("1+2") + t.write_answer("3") + "".join(t.stop)
    assert set(fixed) <= set(CHARSET)
