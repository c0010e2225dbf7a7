"""Every check a study must pass before anything runs; each returns readable problems. Here the
checks of its pieces (arms, base models, templates, seeds, task, settings, extra cells, the
Pass@G phase, the search space, the tuning and the eval recipes: their types, fields and
ranges); those of its inference design are `ablate.study.design_checks`.

The checks read a `Study` through its attributes and import nothing from `ablate.study`'s study
module, which imports them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypeAlias

from ablate.base.errors import AblateError
from ablate.factors import confounds
from ablate.factors.algorithms import Algorithm
from ablate.factors.fields import Rule, record_problems, rule_problem, shown
from ablate.factors.spec import Optim, setting_problems
from ablate.models import zoo_names
from ablate.study.design_checks import (
    control_warnings,
    design_problems,
    eval_size_warnings,
    finding_problems,
    replicate_problems,
    staleness_problems,
)
from ablate.study.resources import training_estimate, tuning_estimate

#: An `ablate.study.Study` (not imported: study imports this module).
Study: TypeAlias = Any


#: The longest study name, in bytes: it names folders (RESULTS/<name>/, OUT/<name>/, an MLflow
#: experiment, `<name>-tune`), and a file name's component is at most 255 bytes, with room left
#: for what ablate adds around it (".tmp-<pid>", "-tune").
MAX_NAME_BYTES = 128
NAME_RULE = Rule(
    pattern=r"[A-Za-z0-9_][A-Za-z0-9_.-]*",
    says="letters, digits, '_', '.' and '-', not starting with '.' or '-'",
    max_bytes=MAX_NAME_BYTES,
    note="it names the study's folders",
)


def name_problems(name: Any) -> list[str]:
    """A study name's problems: text of at most `MAX_NAME_BYTES` that can name a folder."""
    if not isinstance(name, str) or not name:
        return [f"name={name!r} must be a non-empty string"]
    problem = rule_problem(name, "name", NAME_RULE)
    return [] if problem is None else [problem]


def study_problems(study: Study) -> list[str]:
    problems = name_problems(study.name)
    for check in (
        _arm_problems,
        _model_problems,
        _template_problems,
        _seed_problems,
        _task_problems,
        _setting_problems,
        _cell_problems,
        _passk_problems,
        _launch_problems,
        _search_problems,
        _tune_problems,
        replicate_problems,
        finding_problems,
        design_problems,
        staleness_problems,
    ):
        problems.extend(check(study))
    return problems


def study_warnings(study: Study) -> list[str]:
    """Legal but possibly misleading set-ups: arms that differ from the reference in an update
    schedule or KL term they inherit from a preset without declaring it."""

    ref = study.arm(study.reference_arm)
    out = eval_size_warnings(study) + control_warnings(study)
    tuned = sum(a.replicate_of is None for a in study.arms)  # an A/A replicate is not tuned
    if study.tune is not None and (absurd := tuning_estimate(study.budget, study.tune, tuned)):
        out.append(absurd)
    if absurd := training_estimate(study.budget, len(study.cells())):
        out.append(absurd)
    for a in study.compared_arms:
        if a.name != ref.name:
            out += confounds.undeclared(a.name, a.algorithm, a.declared, ref.name, ref.algorithm)
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

    return name in zoo_names() or (Path(name).expanduser() / "config.json").is_file()


def _model_problems(study: Study) -> list[str]:
    if not study.base_models:
        return ["base_models is empty"]

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
    found = [  # once per engine its trials sample with (an arm may set its own)
        setting_problems(study.budget, study.optim, study.eval, study.checkpoint_every, engine)
        for engine in sorted(study.engines)
    ]
    out = list(dict.fromkeys(p for problems in found for p in problems))
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
    from ablate.tasks.templates import template_names

    if type(p).__name__ != "PassKSpec":
        return [f"passk={p!r} must be a PassKSpec(...) or None"]
    e = p.elicit
    if e is not None and type(e).__name__ != "ElicitSpec":
        return [f"passk.elicit={e!r} must be an ElicitSpec(...) or None"]
    if wrong := record_problems(p, "passk: "):  # its ElicitSpec's too, as passk.elicit: ...
        return wrong
    out = []
    if any(k > p.n for k in p.ks):
        out.append(f"passk: ks={tuple(p.ks)} must lie in 1..n={p.n}")
    out += [
        f"passk: unknown template {t!r}" for t in p.templates or () if t not in template_names()
    ]
    return out + (_elicit_problems(e) if e is not None else [])


def _elicit_problems(e) -> list[str]:
    from ablate.tasks.templates import PARSES, template_names

    valid = template_names()
    out = [f"passk.elicit: unknown template {t!r}" for t in e.templates or () if t not in valid]
    out += [
        f"passk.elicit: unknown parse {x!r}; valid: {', '.join(PARSES)}"
        for x in e.parses
        if x not in PARSES
    ]
    return out


def _launch_problems(study: Study) -> list[str]:
    """The launcher's options as one record pass (a `Launch` checks itself when it is built; a
    record replaced afterwards is checked again here)."""
    if study.launch is None:
        return []
    return record_problems(study.launch, "launch: ")


def _search_problems(study: Study) -> list[str]:

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


def _tune_problems(study: Study) -> list[str]:
    """The tuning's and the eval recipes' declarations (`TuneSpec`, `Recipes`): their types, their
    fields, and each tuned range's ends on every arm."""
    from ablate.factors.eval_spec import Recipes
    from ablate.study.tuning import TuneSpec
    from ablate.tasks.templates import template_names

    tune, recipes = study.tune, getattr(study.eval, "robustness", None)
    out = []
    if tune is not None and not isinstance(tune, TuneSpec):
        out.append(
            f"tune={shown(tune)} must be a TuneSpec(...) or None, e.g. TuneSpec("
            "params={'lr': log_range(1e-6, 1e-4)})"
        )
    elif tune is not None:
        out = tune.problems() or _tuned_range_problems(study)
    if recipes is not None and not isinstance(recipes, Recipes):
        wrong = f"eval.robustness={shown(recipes)} must be a Recipes(...) or None"
        return [*out, wrong + ", e.g. Recipes(temperatures=(0.6,))"]
    if recipes is not None and isinstance(recipes.templates, tuple):
        valid = template_names()
        out += [
            f"eval.robustness: unknown template {t!r}; valid: {', '.join(valid)}"
            for t in recipes.templates
            if t not in valid
        ]
    return out


def _tuned_range_problems(study: Study) -> list[str]:
    """Each end of a tuned range the study's Optim or one of its arms refuses (checked here, not
    once tuning proposes it)."""
    from ablate.study.tuning import target_of

    out = []
    for name, dim in study.tune.params.items():
        for value in (dim.low, dim.high):
            if target_of(name) == "optim":
                found = dataclasses.replace(study.optim, **{name: value}).problems()
            else:
                found = [p for a in _tuned_arms(study) for p in _refused(a, name, value)]
            out += [f"tune: {name!r} range [{dim.low:g}, {dim.high:g}]: {p}" for p in found[:1]]
    return list(dict.fromkeys(out))


def _tuned_arms(study: Study) -> list[Any]:
    out = []
    for a in study.arms:
        try:
            if a.replicate_of is None:
                out.append((a.name, a.algorithm))
        except AblateError:
            continue  # reported by the arm checks
    return out


def _refused(named: tuple[str, Algorithm], name: str, value: float) -> list[str]:
    """Why arm `named` = (name, algorithm) refuses `name`=`value` (empty: it accepts it)."""
    import warnings

    arm_name, algorithm = named
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dataclasses.replace(algorithm, **{name: value})
    except AblateError as exc:
        reasons = str(exc).removeprefix("invalid Algorithm:").replace("\n  - ", "; ")
        return [f"arm {arm_name!r} refuses {name}={value:g} ({reasons.strip('; ')})"]
    return []
