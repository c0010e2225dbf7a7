"""Named prompt templates and how a final answer is extracted under each.

The template is a study axis (which prompt a base model sees), not an algorithm field. Each
template renders a bare question into a prompt, extracts the final answer from a completion, and
writes an answer in its own format (`extract(write_answer(a)) == a`), which the synthetic tasks
use to build the pretraining corpus of the tiny char models.

The tiny models are pretrained on `plain` only (`TRAINING_TEMPLATE`). `plain_double_space` adds
one space after the prefix (the mild variant: measured Pass@8 0.27 on the RL-ready rung and 0.19
on the saturated one, against 0.98 under `plain`); `plain_q` changes the question prefix to `Q:`
(stronger: 0.05 and 0.30; it is the variant the zoo recipe measures, `MILD_VARIANT`, kept so
the recipe hash and the shipped ladder stay valid); `plain_spaced` also spaces the
operators of the question (a strong variant: the char model has never seen the spaced form, so
Pass@k goes to about 0). `qwen_math` and `r1` are strong variants too (the tiny model never writes
`\\boxed{}` or `<answer>` tags) and their long prompts do not fit a 192-position tiny model at all;
they are meant for real checkpoints.

Extraction is linear in the completion length (`str.rfind` scans, no backtracking regex), so a
100 kB completion is handled in milliseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from ablate.base.errors import ConfigError

TRAINING_TEMPLATE = "plain"
MILD_VARIANT = "plain_q"  # part of the zoo recipe (its hash): measured at build time
STRONG_VARIANT = "plain_spaced"

GSM8K_MARKER = "####"
R1_SYSTEM = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant "
    "solves it. The Assistant first thinks about the reasoning process in the mind and then "
    "provides the User with the answer. The reasoning process is enclosed within <think> </think> "
    "and answer is enclosed within <answer> </answer> tags, respectively, i.e., <think> reasoning "
    "process here </think> <answer> answer here </answer>."
)
QWEN_MATH_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."

_LAST_NUMBER = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?")
_OPERATOR = re.compile(r"\s*([+\-*/=])\s*")


def last_boxed(text: str, max_tries: int = 8) -> str | None:
    """Content of the last `\\boxed{...}` whose braces close (nested braces allowed), else None.

    Only the last `max_tries` occurrences are tried, so the cost stays linear in `len(text)`."""
    end = len(text)
    for _ in range(max_tries):
        start = text.rfind("\\boxed{", 0, end)
        if start < 0:
            return None
        content = _balanced(text, start + len("\\boxed{"))
        if content is not None:
            return content.strip() or None  # an empty box holds no answer
        end = start
    return None


def _balanced(text: str, begin: int) -> str | None:
    """The text from `begin` up to the `}` that closes an already opened `{`, else None."""
    depth = 1
    for i in range(begin, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[begin:i]
    return None


def after_marker(text: str, marker: str = GSM8K_MARKER) -> str | None:
    """The rest of the line after the last `marker` (GSM8K's `#### 72`), stripped; None if absent
    or empty. The line ends the answer so that a tail written after it cannot change it."""
    pos = text.rfind(marker)
    if pos < 0:
        return None
    line = text[pos + len(marker) :].split("\n", 1)[0].strip()
    return line or None


def last_number(text: str) -> str | None:
    """The last number in `text` (commas allowed as thousands separators), else None."""
    found = None
    for match in _LAST_NUMBER.finditer(text):
        found = match.group(0)
    return found


def extract_marker_or_last_number(completion: str) -> str | None:
    """`none`: the model saw no format, so accept the GSM8K marker or else the last number."""
    return after_marker(completion) or last_number(completion)


def extract_r1_answer(completion: str) -> str | None:
    """The content of the last complete `<answer>...</answer>`, a `\\boxed{}` unwrapped."""
    end = completion.rfind("</answer>")
    if end < 0:
        return None
    start = completion.rfind("<answer>", 0, end)
    if start < 0:
        return None
    inner = completion[start + len("<answer>") : end].strip()
    return (last_boxed(inner) or inner) or None


def space_operators(question: str) -> str:
    """`28+65+18` -> `28 + 65 + 18`: the strong variant for the tiny char models."""
    return _OPERATOR.sub(r" \1 ", question).strip()


@dataclass(frozen=True)
class Template:
    """A prompt format: how a question is shown and how the final answer is read back.

    `prompt` and `answer_format` hold the placeholders `{question}` / `{answer}` (substituted with
    `str.replace`, so braces in questions are safe). `stop` strings are kept in the output."""

    name: str
    prompt: str
    answer_format: str
    extractor: Callable[[str], str | None]
    stop: tuple[str, ...] = ()
    question_transform: Callable[[str], str] | None = None
    description: str = ""

    def render(self, question: str) -> str:
        """The prompt for `question`."""
        shown = self.question_transform(question) if self.question_transform else question
        return self.prompt.replace("{question}", shown)

    def extract(self, completion: str) -> str | None:
        """The final answer in `completion`, or None if the format was not followed."""
        return self.extractor(completion)

    def write_answer(self, answer: str) -> str:
        """`answer` written the way `extract` reads it back."""
        return self.answer_format.replace("{answer}", answer)


_TEMPLATES: dict[str, Template] = {
    t.name: t
    for t in (
        Template(
            name="none",
            prompt="{question}",
            answer_format=f"{GSM8K_MARKER} {{answer}}",
            extractor=extract_marker_or_last_number,
            description="the question alone; answer after '####', else the last number",
        ),
        Template(
            name="plain",
            prompt="Question: {question}\nAnswer:",
            answer_format=f"{GSM8K_MARKER} {{answer}}",
            extractor=after_marker,
            description="Question / Answer; answer = rest of the line after the last '####'",
        ),
        Template(
            name="plain_q",
            prompt="Q: {question}\nAnswer:",
            answer_format=f"{GSM8K_MARKER} {{answer}}",
            extractor=after_marker,
            description="mild variant of plain: only the question prefix changed",
        ),
        Template(
            name="plain_double_space",
            prompt="Question:  {question}\nAnswer:",
            answer_format=f"{GSM8K_MARKER} {{answer}}",
            extractor=after_marker,
            description="mild variant of plain: one extra space after the question prefix",
        ),
        Template(
            name="plain_spaced",
            prompt="Question: {question}\nAnswer:",
            answer_format=f"{GSM8K_MARKER} {{answer}}",
            extractor=after_marker,
            question_transform=space_operators,
            description="strong variant of plain: spaces around the question's operators",
        ),
        Template(
            name="r1",
            prompt=R1_SYSTEM + "\nUser: {question}\nAssistant: <think>",
            answer_format=" </think> <answer>{answer}</answer>",
            extractor=extract_r1_answer,
            stop=("</answer>",),
            description="R1-Zero: think/answer tags, graded inside <answer>, stops at </answer>",
        ),
        Template(
            name="qwen_math",
            prompt=(
                f"<|im_start|>system\n{QWEN_MATH_SYSTEM}<|im_end|>\n"
                "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
            ),
            answer_format="\\boxed{{answer}}",
            extractor=last_boxed,
            stop=("<|im_end|>",),
            description="ChatML with the Qwen2.5-Math system turn; answer = last \\boxed{}",
        ),
    )
}


#: How a completion's final answer is read: `strict` in the template's own format only, `lenient`
#: also the last number anywhere in the completion (a `\\boxed{}` first), the parse the audits of
#: RL-for-reasoning baselines found missing. A verifier's parse is chosen per call
#: (`Task.verify(..., parse=)`); RL rewards keep `strict`.
PARSES = ("strict", "lenient")


def parsed(template: Template, parse: str) -> Template:
    """`template` reading answers with `parse` ("strict": itself; "lenient": its own format, else
    a boxed answer, else the last number); ConfigError on an unknown parse."""
    if parse not in PARSES:
        raise ConfigError(f"unknown answer parse {parse!r}; valid: {', '.join(map(repr, PARSES))}")
    if parse == "strict":
        return template
    strict = template.extractor

    def lenient(completion: str) -> str | None:
        return strict(completion) or last_boxed(completion) or last_number(completion)

    return replace(template, extractor=lenient)


def with_shots(template: Template, examples: list[tuple[str, str]]) -> Template:
    """`template` with worked examples (question, completion) shown before the question, each
    in the template's own prompt and answer format, one per paragraph."""
    if not examples:
        return template
    shown = "".join(template.render(q) + c + PARAGRAPH for q, c in examples)
    return replace(
        template,
        name=f"{template.name}+{len(examples)}shot",
        prompt=shown + template.prompt,
        # the model may go on to a question of its own: its answer must not be read as the reply
        stop=tuple(dict.fromkeys((*template.stop, PARAGRAPH))),
    )


PARAGRAPH = "\n\n"


def template_names() -> tuple[str, ...]:
    """Every template name, in a fixed order."""
    return tuple(_TEMPLATES)


def get_template(name: str) -> Template:
    """The template called `name`; an unknown name raises ConfigError listing the valid ones."""
    try:
        return _TEMPLATES[name]
    except (KeyError, TypeError):
        valid = ", ".join(repr(n) for n in _TEMPLATES)
        raise ConfigError(f"unknown template {name!r}; valid: {valid}") from None
