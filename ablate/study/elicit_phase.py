"""A study's best-elicited base (`PassKSpec.elicit`): per base model, every point of the declared
grid measured on the selection split, the best chosen there, then measured on the eval problems
with the eval sampling settings' sample count beside the as-trained setting and its lenient parse.

One row per (model, split, role, grid point, problem): the per-problem pass rates let the report
pair the base with each arm's final eval problem by problem. Roles on eval:
- `as_trained`: the trials' template, no examples, eval temperature, strict parse (`for_template`);
- `lenient`: the same completions read with the lenient parse (the parser's share of a gain);
- `best_prompt`: the best template × examples at the eval temperature, strict (the prompt's share);
- `best`: the best point of the whole grid (the best-elicited base).
Cached per model weights and settings, written whole (`durable`)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ablate.base import durable
from ablate.base.errors import ConfigError
from ablate.base.records import SamplingParams
from ablate.base.seeding import derive_seed
from ablate.models import load_model, load_tokenizer, resolve_model_path, weights_hash
from ablate.rollout.hf import HFEngine
from ablate.study.resources import model_limits
from ablate.study.study import Study
from ablate.tasks import get_task
from ablate.trial.elicitation import (
    STRICT,
    Prompting,
    best,
    grid,
    pass_rates,
    prompt_template,
    selection_problems,
)

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = (
    "model",
    "split",
    "role",
    "for_template",
    "template",
    "shots",
    "temperature",
    "parse",
    "problem_id",
    "rate",
    "n_samples",
)
ALL = "*"  # for_template of a role that serves every study template


def elicitation_phase(study: Study, cache_dir: Path, progress=None) -> pd.DataFrame:
    """Every base model's elicitation rows (`COLUMNS`), measured or read from the cache."""
    import pandas as pd

    frames = []
    for model in dict.fromkeys(model for _, model, _, _ in study.cells()):
        where = f"{resolve_model_path(model)}@{weights_hash(model)}"
        cached = cache_dir / f"elicit-{_key(study, where)}.csv"
        frame = durable.read_valid(cached, _parse, "its elicitation is measured again")
        if frame is None:
            frame = pd.DataFrame(_measure_model(study, model, progress), columns=list(COLUMNS))
            durable.write_atomic(cached, frame.to_csv(index=False))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _measure_model(study: Study, model: str, progress) -> list[dict]:
    spec, task = study.passk.elicit, get_task(study.task, **dict(study.task_options))
    engine = HFEngine(*load_model(model))
    eval_t = study.eval.temperature
    points = _grid(study)
    chosen = selection_problems(task, spec.selection_problems)
    rows, scores = [], {}
    for (template, shots, temperature), parses in _by_sampling(points).items():
        point = Prompting(template, shots, temperature)
        rates = _rates(study, task, engine, point, parses, chosen, spec.n, "selection", progress)
        for parse, r in rates.items():
            measured = Prompting(template, shots, temperature, parse)
            scores[measured] = float(r.mean())
            rows += _rows(model, "selection", "grid", ALL, measured, chosen, r, spec.n)
    winner = best(scores)
    prompt = best(scores, lambda p: p.parse == STRICT and p.temperature == eval_t)
    problems = task.problems("eval")[: study.eval.max_problems]
    n = study.eval.n_samples
    for role, point in (("best", winner), ("best_prompt", prompt)):
        rates = _rates(study, task, engine, point, [point.parse], problems, n, role, progress)
        rows += _rows(model, "eval", role, ALL, point, problems, rates[point.parse], n)
    for template in study.templates:
        point = Prompting(template, 0, eval_t)
        rates = _rates(
            study, task, engine, point, [STRICT, "lenient"], problems, n, template, progress
        )
        for role, parse in (("as_trained", STRICT), ("lenient", "lenient")):
            measured = Prompting(template, 0, eval_t, parse)
            rows += _rows(model, "eval", role, template, measured, problems, rates[parse], n)
    return rows


def _by_sampling(points: list[Prompting]) -> dict[tuple, list[str]]:
    """Grid points grouped by what needs its own samples: the parses share completions."""
    out: dict[tuple, list[str]] = {}
    for p in points:
        out.setdefault((p.template, p.shots, p.temperature), []).append(p.parse)
    return out


def _rates(study, task, engine, point, parses, problems, n, what, progress):
    spec = study.passk.elicit
    template = prompt_template(task, point, spec.selection_problems, study.seeds[0])
    sampling = SamplingParams(
        max_new_tokens=study.budget.max_new_tokens,
        temperature=point.temperature,
        # one seed per split: common random numbers across the grid, and a point measured under
        # two roles gives the same numbers
        seed=derive_seed(study.seeds[0], "elicit", "selection" if what == "selection" else "eval"),
    )
    label = f"elicit {what}: {point.label}"
    return pass_rates(
        engine, task, problems, template, parses, sampling, n=n, progress=progress, label=label
    )


def check_elicitation(study: Study, models: list[str]) -> None:
    """ConfigError before any compute naming every grid point whose prompts (selection or eval
    problems) leave a model no room for `max_new_tokens`: few-shot prompts are the usual cause."""

    spec = study.passk.elicit if study.passk is not None else None
    if spec is None:
        return
    task = get_task(study.task, **dict(study.task_options))
    problems = selection_problems(task, spec.selection_problems)
    problems += task.problems("eval")[: study.eval.max_problems]
    points = {(p.template, p.shots): p for p in _grid(study)}.values()
    bad = []
    for model in models:
        positions = model_limits(resolve_model_path(model)).get("positions")
        if not positions:
            continue
        tokenizer = load_tokenizer(model)
        for point in points:
            template = prompt_template(task, point, spec.selection_problems, study.seeds[0])
            prompts = [template.render(p.question) for p in problems]
            longest = max(len(ids) for ids in tokenizer(prompts)["input_ids"])
            if longest + study.budget.max_new_tokens > positions:
                shots = f" + {point.shots}-shot" if point.shots else ""
                bad.append(f"{point.template}{shots} on {model} ({longest} prompt tokens)")
    if bad:
        raise ConfigError(
            f"passk.elicit: prompts of {'; '.join(bad)} leave no room for max_new_tokens="
            f"{study.budget.max_new_tokens} in the model's positions: use fewer shots or "
            "drop those templates"
        )


def _grid(study: Study) -> list[Prompting]:
    spec = study.passk.elicit
    return grid(
        spec.templates or study.templates,
        spec.shots,
        spec.temperatures,
        spec.parses,
        study.eval.temperature,
    )


def _rows(model, split, role, for_template, point, problems, rates, n) -> list[dict]:
    return [
        {
            "model": model,
            "split": split,
            "role": role,
            "for_template": for_template,
            "template": point.template,
            "shots": point.shots,
            "temperature": point.temperature,
            "parse": point.parse,
            "problem_id": p.id,
            "rate": float(r),
            "n_samples": n,
        }
        for p, r in zip(problems, rates, strict=True)
    ]


def _parse(path: Path) -> pd.DataFrame:
    import pandas as pd

    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    if list(frame.columns) != list(COLUMNS) or frame.isna().any().any() or not len(frame):
        raise ValueError("not a whole elicitation table")
    return frame


def _key(study: Study, model_path: str) -> str:
    blob = json.dumps(
        [
            model_path,
            study.task,
            sorted(study.task_options.items()),
            study.passk.elicit,
            list(study.templates),
            study.eval.n_samples,
            study.eval.max_problems,
            study.eval.temperature,
            study.budget.max_new_tokens,
            study.seeds[0],
        ],
        default=repr,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
