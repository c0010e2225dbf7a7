"""The best-elicited base: how well a base model answers under the best of a declared grid of
prompts (template × few-shot examples), sampling temperatures and answer parses, chosen on a
selection split and measured on the eval problems the trials are evaluated on.

Why: audits of RL-for-reasoning papers found most of some "RL gains" were a base model measured
under a parser, template or temperature that hid what it could already do. Choosing the best point
on eval problems would bias the base upwards (the maximum of noisy scores); choosing it on a
selection split and measuring it afresh on eval does not.

A grid point's completions are sampled once and verified under every parse, so parses cost no
sampling. Few-shot examples come from the train split after the selection problems: never a
selection or an eval problem.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.base.seeding import derive_seed
from ablate.rollout.base import RolloutEngine
from ablate.tasks.base import Problem, Task, completion_lead
from ablate.tasks.templates import PARSES, Template, get_template, with_shots

STRICT = "strict"
Progress = Callable[[str, int, int], None]  # (what, done, total)


@dataclass(frozen=True)
class Prompting:
    """One point of an elicitation grid."""

    template: str
    shots: int
    temperature: float
    parse: str = STRICT

    @property
    def label(self) -> str:
        shots = f" + {self.shots}-shot" if self.shots else ""
        return f"{self.template}{shots}, T={self.temperature:g}, {self.parse} parse"


def grid(
    templates: Sequence[str],
    shots: Sequence[int],
    temperatures: Sequence[float],
    parses: Sequence[str],
    eval_temperature: float,
) -> list[Prompting]:
    """Every point, in a fixed order: the eval temperature and the strict parse come first, so a
    tie goes to the setting the trials are evaluated under."""
    temps = tuple(dict.fromkeys((float(eval_temperature), *map(float, temperatures))))
    kinds = tuple(dict.fromkeys((STRICT, *parses)))
    unknown = [p for p in kinds if p not in PARSES]
    if unknown:
        raise ConfigError(f"unknown answer parse {unknown[0]!r}; valid: {', '.join(PARSES)}")
    return [
        Prompting(t, int(k), temp, parse)
        for t in dict.fromkeys(templates)
        for k in dict.fromkeys(shots)
        for temp in temps
        for parse in kinds
    ]


def best(scores: dict[Prompting, float], allowed: Callable[[Prompting], bool] = bool) -> Prompting:
    """The allowed point with the highest score; the first in the grid's order on a tie."""
    pool = [(p, s) for p, s in scores.items() if allowed(p) and np.isfinite(s)]
    if not pool:
        raise ConfigError("no elicitation grid point was measured: nothing to choose from")
    top = max(s for _, s in pool)
    return next(p for p, s in pool if s == top)


def selection_problems(task: Task, count: int) -> list[Problem]:
    """The selection split: the first `count` train problems (train shares none with eval)."""
    problems = task.problems("train")[:count]
    if not problems:
        raise ConfigError(f"task {task.name!r} has no train problems to select an elicitation on")
    return problems


def prompt_template(task: Task, point: Prompting, after: int, seed: int) -> Template:
    """The point's template with its worked examples: train problems `after` onwards."""
    template = get_template(point.template)
    if not point.shots:
        return template
    pool = task.problems("train")[after : after + point.shots]
    if len(pool) < point.shots:
        raise ConfigError(
            f"task {task.name!r} has {len(pool)} train problems after the {after} selection "
            f"problems, fewer than the {point.shots} few-shot examples asked for"
        )
    rng = random.Random(derive_seed(seed, "shots", point.template))
    return with_shots(template, [(p.question, _worked(task, p, template, rng)) for p in pool])


def _worked(task: Task, problem: Problem, template: Template, rng: random.Random) -> str:
    """A worked solution where the task can write one, else the bare answer in the format."""
    try:
        return task.sample_solution(problem, template, rng)
    except ConfigError:
        return completion_lead(template, problem.question) + template.write_answer(problem.answer)


def pass_rates(
    engine: RolloutEngine,
    task: Task,
    problems: Sequence[Problem],
    template: Template,
    parses: Sequence[str],
    sampling: SamplingParams,
    *,
    n: int,
    prompts_per_batch: int = 32,
    progress: Progress | None = None,
    label: str = "",
) -> dict[str, np.ndarray]:
    """parse -> [problems] pass rates over `n` samples, from one set of completions."""
    stops = tuple(dict.fromkeys((*sampling.stop, *template.stop)))
    correct: dict[str, list[float]] = {parse: [] for parse in parses}
    for start in range(0, len(problems), prompts_per_batch):
        chunk = problems[start : start + prompts_per_batch]
        chunk_sampling = dataclasses.replace(
            sampling, stop=stops, seed=derive_seed(sampling.seed, "elicit", str(start))
        )
        rollouts = engine.generate(
            [template.render(p.question) for p in chunk],
            n,
            chunk_sampling,
            problem_ids=[p.id for p in chunk],
        )
        for parse in parses:
            verdicts = [
                task.verify(chunk[b // n], text, template, parse)
                for b, text in enumerate(rollouts.texts)
            ]
            hits = np.array([v.correct for v in verdicts], dtype=float).reshape(-1, n)
            correct[parse].extend(hits.mean(axis=1).tolist())
        if progress is not None:
            progress(label, min(start + prompts_per_batch, len(problems)), len(problems))
    return {parse: np.asarray(rates) for parse, rates in correct.items()}
