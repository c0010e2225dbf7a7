"""Task registry, Verdict accounting, the never-raise / time-limit contract, adversarial input."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from ablate.base.errors import ConfigError
from ablate.tasks import CHARSET, Problem, Task, Verdict, get_task, task_names
from ablate.tasks.base import TIMEOUT, Split
from ablate.tasks.templates import get_template, template_names
from ablate.testing import ManualClock

FIXTURES = Path(__file__).parent / "fixtures"

_garbage = random.Random(0)
ADVERSARIAL = {
    "empty": "",
    "huge_number": "9" * 100_000,
    "power_tower": "9**9**9**9",
    "million_digit_exponent": "10**" + "9" * 1_000_000,
    "nested_parens": "(" * 50_000 + "1" + ")" * 50_000,
    "garbage_100kB": "".join(chr(_garbage.randrange(1, 0x2FFF)) for _ in range(100_000)),
    "unicode": "٣٤ 𝟙𝟚 ½ ∞ ÷ 日本 \u202e\u0000 \ud800".encode("utf-8", "replace").decode(),
    "unicode_digits": "١١١",
    "many_markers": "#### " * 20_000,
    "many_boxes": "\\boxed{" * 20_000,
    "many_tags": "<answer>" * 10_000 + "</answer>",
}


def payloads(template_name: str):
    """Each adversarial string bare and wrapped in the template's answer format."""
    t = get_template(template_name)
    for label, text in ADVERSARIAL.items():
        yield label, text
        yield f"{label}-as-answer", t.write_answer(text)


SYNTHETIC = {
    "arithmetic": {"n_train": 10, "n_eval": 5},
    "arithmetic-tail": {"n_train": 10, "n_eval": 5, "layout": "tail"},
    "countdown": {"n_train": 10, "n_eval": 5},
    "gsm8k": {"path": str(FIXTURES / "gsm8k_small.jsonl"), "n_eval": 2},
}


@pytest.mark.parametrize("task_key", sorted(SYNTHETIC))
@pytest.mark.parametrize("template_name", template_names())
def test_adversarial_completions_return_a_verdict_within_the_limit(task_key, template_name):
    task = get_task(task_key.split("-")[0], **SYNTHETIC[task_key])
    problem = task.problems("eval")[0]
    for label, completion in payloads(template_name):
        verdict = task.verify(problem, completion, get_template(template_name))
        assert isinstance(verdict, Verdict), label
        # bounded: judged within the limit (`verify` times itself), not timed out
        assert verdict.error is None, (label, verdict.error)
        assert not verdict.correct and verdict.reward == 0.0, label


def test_task_names_and_unknown_names_or_options():
    assert set(task_names()) == {"arithmetic", "countdown", "gsm8k", "math", "selection_split"}
    with pytest.raises(ConfigError, match="arithmetic"):
        get_task("sudoku")
    with pytest.raises(ConfigError, match=r"'shuffle'.*shuffle_steps"):
        get_task("arithmetic", shuffle=True)
    with pytest.raises(ConfigError, match="time_limit"):
        get_task("arithmetic", time_limit=0)
    with pytest.raises(ConfigError, match="split"):
        get_task("arithmetic", n_train=5, n_eval=5).problems("test")  # type: ignore[arg-type]


@dataclass(frozen=True, kw_only=True)
class _Broken(Task):
    """A task whose verifier misbehaves on purpose."""

    name: ClassVar[str] = "broken"
    clock: ClassVar[ManualClock] = ManualClock()
    delay: float = 0.0
    """Seconds the verifier takes, on `clock`."""

    def problems(self, split: Split) -> list[Problem]:
        return [Problem("broken-1", "q", "1")]

    def _verify(self, problem, completion, template):
        if completion == "raise":
            raise RuntimeError("verifier bug")
        self.clock.advance(self.delay)
        return Verdict(1.0, True, "1", True)


def test_a_raising_verifier_yields_a_counted_error_not_a_silent_zero():
    task, plain = _Broken(), get_template("plain")
    v = task.verify(task.problems("eval")[0], "raise", plain)
    assert (v.reward, v.correct) == (0.0, False) and "RuntimeError: verifier bug" in v.error


def test_a_verifier_overrunning_its_limit_is_reported_as_timeout():
    problem, plain = _Broken().problems("eval")[0], get_template("plain")
    assert _Broken(delay=0.04, time_limit=0.05).verify(problem, "fine", plain).correct
    v = _Broken(delay=0.06, time_limit=0.05).verify(problem, "fine", plain)
    assert v.error == TIMEOUT and not v.correct and v.reward == 0.0


@pytest.mark.parametrize("name", ["arithmetic", "countdown"])
def test_synthetic_text_stays_inside_the_charset(name):
    assert set(CHARSET) == {"\n", *map(chr, range(32, 127))}
    task, rng = get_task(name, n_train=200, n_eval=10), random.Random(0)
    for template_name in template_names():
        t = get_template(template_name)
        for p in task.problems("train"):
            assert set(t.render(p.question) + task.sample_solution(p, t, rng)) <= set(CHARSET)


def test_local_tasks_have_no_generated_solutions():
    task = get_task("gsm8k", path=str(FIXTURES / "gsm8k_small.jsonl"), n_eval=2)
    with pytest.raises(ConfigError, match="synthetic"):
        task.sample_solution(task.problems("eval")[0], get_template("plain"), random.Random(0))


def test_every_task_module_beside_the_registry_is_registered_without_a_list():
    """A new task is one file in ablate/tasks/: the package imports its modules itself."""
    import ast
    from pathlib import Path

    import ablate.tasks

    declared = set()
    for path in Path(ablate.tasks.__file__).parent.glob("[!_]*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            decorated = isinstance(node, ast.ClassDef) and any(
                getattr(d, "id", None) == "register_task" for d in node.decorator_list
            )
            if decorated:
                declared.add(node.name)
    registered = {ablate.tasks.base.TASKS.get(n).__name__ for n in ablate.tasks.task_names()}
    assert declared and declared <= registered
