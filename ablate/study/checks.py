"""Every check a study must pass before anything runs; each returns readable problems.

The checks read a `Study` through its attributes and import nothing from `ablate.study`, which
imports them.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from pathlib import Path
from typing import Any, TypeAlias

from ablate.base.errors import AblateError
from ablate.factors.finding import Finding
from ablate.factors.spec import setting_problems

#: An `ablate.study.Study` (not imported: study imports this module).
Study: TypeAlias = Any


def study_problems(study: Study) -> list[str]:
    problems: list[str] = []
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", study.name or ""):
        problems.append(f"name {study.name!r} must be non-empty letters, digits, '_', '.', '-'")
    for check in (
        _arm_problems,
        _model_problems,
        _template_problems,
        _seed_problems,
        _task_problems,
        _setting_problems,
        _cell_problems,
        _passk_problems,
        _search_problems,
        _replicate_problems,
        _finding_problems,
        _design_problems,
    ):
        problems.extend(check(study))
    return problems


def study_warnings(study: Study) -> list[str]:
    """Legal but possibly misleading set-ups: arms that differ from the reference in an update
    schedule or KL term they inherit from a preset without declaring it."""
    from ablate.factors import confounds

    ref = study.arm(study.reference_arm)
    out = _eval_size_warnings(study) + _control_warnings(study)
    for a in study.compared_arms:
        if a.name != ref.name:
            out += confounds.undeclared(a.name, a.algorithm, a.declared, ref.name, ref.algorithm)
    return out


#: Fewer eval problems than this and the task-level reading rests on a small sample of the task.
MIN_EVAL_PROBLEMS = 256


def eval_problem_count(study: Study) -> int | None:
    """How many eval problems each eval reads: the declared J or the whole split (None when the
    task cannot be built, which `_task_problems` reports)."""
    options = tuple(sorted(study.task_options.items()))
    try:
        split = _eval_split_size(study.task, options)
    except TypeError:  # an unhashable option value: not cached
        split = _eval_split_size.__wrapped__(study.task, options)
    declared = study.eval.max_problems
    return None if split is None else split if declared is None else min(declared, split)


@functools.lru_cache(maxsize=32)
def _eval_split_size(task: str, options: tuple) -> int | None:
    """The task's eval split size, built once per process: generating a synthetic split costs
    ~0.3 s, and every `Study` (and every `dataclasses.replace` of one) checks it."""
    from ablate.tasks import get_task

    try:
        return len(get_task(task, **dict(options)).problems("eval"))
    except AblateError:
        return None


def _eval_size_warnings(study: Study) -> list[str]:
    count = eval_problem_count(study)
    if count is None or count >= MIN_EVAL_PROBLEMS:
        return []
    return [
        f"each eval reads {count} problems of {study.task}'s eval split: the report treats them "
        f"as a sample of the task, and below {MIN_EVAL_PROBLEMS} problems its intervals are wide "
        "(use the whole split: EvalSpec(max_problems=None), or more problems)"
    ]


#: An A/A check on fewer seeds than this rarely fails even when the pipeline is miscalibrated.
MIN_AA_SEEDS = 5


def _control_warnings(study: Study) -> list[str]:
    seeds: dict[str, set] = {}
    for arm, _, _, seed in study.cells():
        seeds.setdefault(arm, set()).add(seed)
    return [
        f"A/A replicate {a.name!r} runs {len(seeds.get(a.name, ()))} seeds: the check needs at "
        f"least {MIN_AA_SEEDS} (add seeds, e.g. Cells(arms=[{a.name!r}, {a.replicate_of!r}], "
        "seeds=[...]))"
        for a in study.arms
        if a.replicate_of and len(seeds.get(a.name, ())) < MIN_AA_SEEDS
    ]


def _replicate_problems(study: Study) -> list[str]:
    names = {a.name: a for a in study.arms}
    out = []
    for a in study.arms:
        if a.replicate_of is None:
            continue
        original = names.get(a.replicate_of)
        if original is None or original.replicate_of is not None or original.name == a.name:
            out.append(
                f"arm {a.name!r}: replicate_of={a.replicate_of!r} must name another arm that is "
                "not itself a replicate"
            )
            continue
        try:
            diff = sorted(a.algorithm.diff(original.algorithm))
        except AblateError:
            continue  # reported by _arm_problems
        if diff:
            out.append(
                f"arm {a.name!r} is a replicate of {original.name!r} but its algorithm differs in "
                f"{diff}: write arm({a.name!r}, replicate_of={original.name!r}) without a base"
            )
    ref = names.get(study.reference_arm) if study.arms else None
    if ref is not None and ref.replicate_of is not None:
        out.append(f"the reference arm {ref.name!r} must not be a replicate")
    return out


def _finding_problems(study: Study) -> list[str]:
    """A study declares the findings it tests: each names this study, once, and both its arms
    have trials on its base model and template."""
    cells = {(a, model, template) for a, model, template, _ in study.cells()}
    out, seen = [], set()
    for f in study.findings:
        if not isinstance(f, Finding):
            out.append(f"findings: {f!r} is not a Finding(...)")
            continue
        if f.id in seen:
            out.append(f"finding {f.id!r} is declared twice")
        seen.add(f.id)
        if f.study != study.name:
            out.append(f"finding {f.id!r}: study={f.study!r}, but study {study.name!r} declares it")
        for role, name in (("arm", f.arm), ("reference", f.reference)):
            if (name, f.model, f.template) not in cells:
                out.append(
                    f"finding {f.id!r}: {role}={name!r} has no trials on base model "
                    f"{f.model!r} with template {f.template!r}"
                )
    return out


def _arm_problems(study: Study) -> list[str]:
    if not study.arms:
        return ["arms is empty: add at least one arm (e.g. arm('grpo', 'grpo'))"]
    out, names = [], [a.name for a in study.arms]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        out.append(f"duplicate arm names {dupes}: every arm needs its own name")
    for a in study.arms:
        try:
            algorithm = a.algorithm
        except AblateError as exc:  # already names the arm
            out.append(str(exc).replace("\n", " "))
            continue
        try:
            algorithm.resolve(max_new_tokens=study.budget.max_new_tokens)
        except AblateError as exc:
            out.append(f"arm {a.name!r}: {exc}".replace("\n", " "))
    if study.reference is not None and study.reference not in names:
        out.append(f"reference arm {study.reference!r} is not one of the arms {names}")
    return out


def model_is_known(name: str) -> bool:
    from ablate.models import zoo_names

    return name in zoo_names() or (Path(name).expanduser() / "config.json").is_file()


def _model_problems(study: Study) -> list[str]:
    if not study.base_models:
        return ["base_models is empty"]
    from ablate.models import zoo_names

    return [
        f"unknown base model {m!r}: not a zoo model ({', '.join(zoo_names())}) nor a local "
        "checkpoint folder with a config.json"
        for m in study.base_models
        if not model_is_known(m)
    ]


def _template_problems(study: Study) -> list[str]:
    from ablate.tasks.templates import template_names

    if not study.templates:
        return ["templates is empty"]
    valid = template_names()
    return [
        f"unknown template {t!r}; valid: {', '.join(valid)}"
        for t in study.templates
        if t not in valid
    ]


def _seed_problems(study: Study) -> list[str]:
    seeds = list(study.seeds)
    if not seeds:
        return ["seeds is empty: give at least one seed (paired comparisons want >= 2)"]
    out = [
        f"seed {s!r} is not an integer"
        for s in seeds
        if not isinstance(s, int) or isinstance(s, bool)
    ]
    if len(set(seeds)) != len(seeds):
        out.append(f"duplicate seeds in {seeds}")
    return out


def _task_problems(study: Study) -> list[str]:
    from ablate.tasks import get_task

    try:
        get_task(study.task, **dict(study.task_options))
    except AblateError as exc:
        return [f"task: {exc}"]
    return []


def _setting_problems(study: Study) -> list[str]:
    out = setting_problems(
        study.budget, study.optim, study.eval, study.checkpoint_every, study.engine
    )
    e = study.effect_of_interest
    if e is not None and not (isinstance(e, int | float) and 0 < e <= 1):
        out.append(f"effect_of_interest={e!r} must be a Δ pass@1 in (0, 1], e.g. 0.02")
    if study.curves is not None:
        out += study.curves.problems()
    return out


def _cell_problems(study: Study) -> list[str]:
    from ablate.tasks.templates import template_names

    arms = {a.name for a in study.arms}
    out = []
    for i, cells in enumerate(study.extra):
        for a in cells.arms or ():
            if a not in arms:
                out.append(f"extra[{i}] names unknown arm {a!r}")
        for m in cells.base_models or ():
            if not model_is_known(m):
                out.append(f"extra[{i}] names unknown base model {m!r}")
        for t in cells.templates or ():
            if t not in template_names():
                out.append(f"extra[{i}] names unknown template {t!r}")
        if cells.seeds is not None and not cells.seeds:
            out.append(f"extra[{i}] has an empty seed list")
    return out


def _passk_problems(study: Study) -> list[str]:
    p = study.passk
    if p is None:
        return []
    from ablate.factors.fields import type_problems
    from ablate.tasks.templates import template_names

    if wrong := type_problems(p):
        return wrong
    out = []
    if p.n < 1 or not p.ks or any(not 1 <= k <= p.n for k in p.ks):
        out.append(f"passk: ks={tuple(p.ks)} must lie in 1..n={p.n}")
    if p.max_problems < 1:
        out.append("passk: max_problems must be >= 1")
    out += [
        f"passk: unknown template {t!r}" for t in p.templates or () if t not in template_names()
    ]
    return out + (_elicit_problems(p.elicit) if p.elicit is not None else [])


def _elicit_problems(e) -> list[str]:
    from ablate.factors.fields import type_problems
    from ablate.tasks.templates import PARSES, template_names

    if type(e).__name__ != "ElicitSpec":
        return [f"passk.elicit={e!r} must be an ElicitSpec(...) or None"]
    if wrong := type_problems(e):
        return [f"passk.elicit: {w}" for w in wrong]
    valid = template_names()
    out = [f"passk.elicit: unknown template {t!r}" for t in e.templates or () if t not in valid]
    out += [
        f"passk.elicit: unknown parse {x!r}; valid: {', '.join(PARSES)}"
        for x in e.parses
        if x not in PARSES
    ]
    if any(not isinstance(k, int) or k < 0 for k in e.shots) or not e.shots:
        out.append(f"passk.elicit: shots={e.shots} must be integers >= 0 (0 = no examples)")
    if any(not t > 0 for t in e.temperatures):
        out.append(f"passk.elicit: temperatures={e.temperatures} must be > 0")
    if e.selection_problems < 1 or e.n < 1:
        out.append("passk.elicit: selection_problems and n must be >= 1")
    return out


def _search_problems(study: Study) -> list[str]:
    from ablate.factors.algorithms import Algorithm
    from ablate.factors.spec import Optim

    valid = {
        "algorithm": {f.name for f in dataclasses.fields(Algorithm)},
        "optim": {f.name for f in dataclasses.fields(Optim)},
    }
    out = []
    for name, dim in study.search.items():
        if dim.target not in valid or name not in valid[dim.target]:
            out.append(f"search: {name!r} is not a field of {dim.target}")
        if dim.choices is None and (dim.low is None or dim.high is None or dim.low >= dim.high):
            out.append(f"search: {name!r} needs choices or low < high")
    return out


SPENDING = ("obrien_fleming", "pocock")
PRIMARY = ("equal steps", "equal tokens")


def _design_problems(study: Study) -> list[str]:
    """The inference design: margin, primary family, sequential looks, positive control."""
    out = []
    margin = study.equivalence_margin
    if margin is not None and not (isinstance(margin, int | float) and 0 < margin < 1):
        out.append(f"equivalence_margin={margin!r} must be a Δ pass@1 in (0, 1) or None")
    if study.primary not in PRIMARY:
        out.append(f"primary={study.primary!r} must be one of {', '.join(map(repr, PRIMARY))}")
    if study.spending not in SPENDING:
        out.append(f"spending={study.spending!r} must be one of {', '.join(map(repr, SPENDING))}")
    looks = list(study.looks)
    if looks:
        if not all(isinstance(k, int) and not isinstance(k, bool) for k in looks):
            out.append(f"looks={tuple(looks)!r} must be seed counts (ints)")
        elif looks != sorted(set(looks)) or looks[0] < 3 or looks[-1] > len(study.seeds):
            out.append(
                f"looks={tuple(looks)!r} must increase, start at 3 or more seeds and end at most "
                f"at the study's {len(study.seeds)} seeds"
            )
    control = study.positive_control
    if control is not None:
        names = {a.name: a for a in study.arms}
        if control not in names:
            out.append(f"positive_control={control!r} names no arm of the study")
        elif control == study.reference_arm or names[control].replicate_of:
            out.append(
                f"positive_control={control!r} must be an arm other than the reference and its "
                "replicates"
            )
    return out
