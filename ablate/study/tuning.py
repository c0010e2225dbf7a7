"""Tuned arms at an equal budget (`Study(tune=TuneSpec(...))`): before the study's trials, every
arm gets the same number of tuning trials of the same length, each evaluated on a selection split
carved out of the task's train split (`ablate.tasks.selection`; never the eval split the verdicts
are read on); the study's seeds then train at each arm's chosen setting.

Here the declaration, its checks and the tuning trials' specs; `ablate.study.tune_phase` runs
them. A tuning trial is the arm on the study's first base model and template, at one of the
tuning seeds, with the sampled values in its Algorithm or Optim.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ablate.factors.algorithms import Algorithm
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.fields import Rule, record_problems
from ablate.factors.spec import Optim, TrialSpec
from ablate.study.resources import BYTES_PER_TOKEN
from ablate.tasks.selection import NAME as SELECTION_TASK

#: The split tuning selects on: the first `selection_problems` of the task's train split.
SELECTION = "selection"
#: The split the study's verdicts are read on: tuning may never select on it.
EVAL = "eval"


@dataclass(frozen=True, kw_only=True)
class Range:
    """One tuned dimension: floats in [low, high], log-uniform when `log`."""

    low: float
    high: float
    log: bool = False


def log_range(low: float, high: float) -> Range:
    """Log-uniform floats in [low, high] (a learning rate: `log_range(1e-6, 1e-4)`)."""
    return Range(low=low, high=high, log=True)


def linear_range(low: float, high: float) -> Range:
    """Uniform floats in [low, high]."""
    return Range(low=low, high=high)


#: `<results>/<study>/tuning.csv`: one row per (arm, setting tried), written by the tuning phase
#: (`ablate.study.tune_phase`), read by the report; the params' own columns follow these.
FILE = "tuning.csv"
COLUMNS = ("arm", "number", "score", "state", "chosen")
#: `<results>/<study>/recipes.csv`: the final checkpoints under each eval recipe
#: (`ablate.study.recipe_phase`), read by the report.
RECIPES_FILE = "recipes.csv"


def chosen_values(table: Any) -> dict[str, dict[str, float]]:
    """arm -> its chosen values, from a tuning.csv frame (empty: no tuning)."""
    if table is None or not len(table) or "chosen" not in table:
        return {}
    params = [c for c in table.columns if c not in COLUMNS]
    picked = table[table["chosen"].astype(str).str.lower() == "true"]
    return {str(r["arm"]): {p: float(r[p]) for p in params} for _, r in picked.iterrows()}


_RECORDS = {"optim": Optim, "algorithm": Algorithm}
#: Where a tuned parameter lives, by field name.
TARGETS = {target: {f.name for f in dataclasses.fields(r)} for target, r in _RECORDS.items()}


def target_of(name: str) -> str | None:
    """ "optim" or "algorithm" for a field of either (Optim first: `lr`), else None."""
    return next((t for t, names in TARGETS.items() if name in names), None)


#: The fields a `Range` can tune, by where they live: the float ones (an integer or a choice
#: would be handed a float the trial refuses, after tuning started).
TUNABLE = {
    target: tuple(f.name for f in dataclasses.fields(r) if str(f.type) in ("float", "float | None"))
    for target, r in _RECORDS.items()
}
#: Settings tried per arm at most: TPE's proposals stop improving long before, and a tuning
#: phase of more runs than this per arm is a typo (`TuneSpec(trials=10**9)`), not a design.
MAX_TRIALS = 1000


@dataclass(frozen=True, kw_only=True)
class TuneSpec:
    """Every arm tuned with the same budget: `trials` settings (proposed by Optuna's TPE sampler,
    pinned by `sampler_seed`), each trained `steps` steps at every one of `seeds`, scored by mean
    pass@1 on the selection split; the best setting is the arm's."""

    params: Mapping[str, Range] = field(default_factory=dict)
    """The tuned Optim or Algorithm fields, e.g. {"lr": log_range(1e-6, 1e-4)}."""
    trials: int = 8
    """Settings tried per arm (the same for every arm; none is pruned)."""
    steps: int = 20
    """RL steps of one tuning trial."""
    seeds: Sequence[int] = (0,)
    """Seeds each setting is trained at (its score is their mean)."""
    selection: str = SELECTION
    """The split settings are chosen on: "selection" (held out of the train split)."""
    selection_problems: int = 64
    """Problems of the selection split (the first ones of the task's train split; tuning trials
    train on the rest)."""
    sampler_seed: int = 0
    """The TPE sampler's seed: the same proposals for every arm until their results differ."""

    RULES: ClassVar[dict[str, Rule]] = {
        "trials": Rule(low=1),
        "steps": Rule(low=1),
        "seeds": Rule(nonempty=True),
        "selection_problems": Rule(low=1),
    }

    def __post_init__(self) -> None:
        if isinstance(self.seeds, list | tuple | range):
            object.__setattr__(self, "seeds", tuple(self.seeds))
        if isinstance(self.params, Mapping):
            object.__setattr__(self, "params", dict(self.params))

    @property
    def runs_per_arm(self) -> int:
        return self.trials * len(self.seeds)

    def problems(self) -> list[str]:
        out = [f"tune: {p}" for p in record_problems(self)] or self._count_problems()
        if self.selection == EVAL:
            out.append(
                "tune: selection='eval' is the eval split the verdicts are read on: select on "
                f"{SELECTION!r} (held out of the train split)"
            )
        elif self.selection != SELECTION:
            out.append(f"tune: unknown selection split {self.selection!r}; valid: {SELECTION!r}")
        if not isinstance(self.params, Mapping) or not self.params:
            out.append("tune: params is empty: e.g. params={'lr': log_range(1e-6, 1e-4)}")
            return out
        for name, dim in self.params.items():
            out += _param_problems(name, dim)
        return out

    def _count_problems(self) -> list[str]:
        """Too many trials, or a seed given twice (fields of the right types)."""
        out = []
        if self.trials > MAX_TRIALS:
            out.append(
                f"tune: trials={self.trials:,} settings per arm is more than the {MAX_TRIALS:,} "
                "a tuning phase may try (TPE stops improving long before): use fewer"
            )
        if len(set(self.seeds)) != len(self.seeds):
            out.append(
                f"tune: duplicate seeds in seeds={self.seeds}: each setting would be trained "
                "twice at one seed and counted twice in its score; give distinct seeds"
            )
        return out

    def describe(self) -> str:
        """'8 trials × 1 seed × 20 steps on 64 selection problems'."""
        seeds = f"{len(self.seeds)} seed{'s' * (len(self.seeds) > 1)}"
        return (
            f"{self.trials} trials × {seeds} × {self.steps} steps on {self.selection_problems} "
            "selection problems"
        )


def _param_problems(name: str, dim: Any) -> list[str]:
    target = target_of(name)
    if target is None:
        return [f"tune: unknown param {name!r}: not a field of Optim or Algorithm"]
    if name not in TUNABLE[target]:
        kind = next(str(f.type) for f in dataclasses.fields(_RECORDS[target]) if f.name == name)
        return [
            f"tune: {name!r} ({kind}) cannot be tuned: a range tunes float fields only; tunable: "
            f"Optim's {', '.join(TUNABLE['optim'])} and Algorithm's "
            f"{', '.join(TUNABLE['algorithm'])} (compare values of {name!r} as arms instead)"
        ]
    if not isinstance(dim, Range):
        return [f"tune: {name!r} must be a range, e.g. log_range(1e-6, 1e-4), got {dim!r}"]
    finite = all(isinstance(v, int | float) and math.isfinite(v) for v in (dim.low, dim.high))
    if not finite or not dim.low < dim.high:
        return [f"tune: {name!r} has an empty range [{dim.low}, {dim.high}]: needs low < high"]
    if dim.log and dim.low <= 0:
        return [f"tune: {name!r} is log-uniform: needs low > 0, got {dim.low}"]
    return []


def recipe_sizes(study: Any) -> tuple[int, int] | None:
    """(the largest token limit of a study's eval recipes, samples of a problem the recipe phase
    draws at it), for the size checks before compute; None without recipes of their own limit."""
    recipes = study.eval.robustness
    if recipes is None or not recipes.max_new_tokens:
        return None
    return max(recipes.max_new_tokens), study.eval.n_samples


def recipe_size_problem(tokens: int, n: int, model: str, limits: dict, memory) -> str | None:
    """Why `n` samples of one problem at `tokens` new tokens cannot run on `model` (its
    positions, then a floor of the memory: the weights, one sequence's logits and each
    sample's per-token state, as `ablate.study.resources` counts them), or None."""
    said = f"eval.robustness: Recipes: max_new_tokens={tokens:,}"
    positions = limits.get("positions")
    if positions and tokens >= positions:
        return (
            f"{said} leaves no room for a prompt in {model}'s {positions:,} positions: use at "
            f"most {positions - 1:,}"
        )
    if memory is None:
        return None
    total, where = memory
    weights = limits.get("weight_bytes", 0)
    per_token = limits.get("vocab", 0) * 4 + n * (BYTES_PER_TOKEN + limits.get("hidden_bytes", 0))
    if weights + tokens * per_token <= total:
        return None
    most = max(total - weights, 0) // per_token
    return (
        f"{said} is more than {where} can hold: {n} samples of a problem (EvalSpec.n_samples) "
        f"of {tokens:,} tokens of {model} need at least {(weights + tokens * per_token) / 1e9:,.1f}"
        f" GB and there are {total / 1e9:,.1f} GB: use at most {most:,}"
    )


def selection_size_problem(tune: TuneSpec, task: str, train: int) -> str | None:
    """Why `tune.selection_problems` cannot be held out of `task`'s `train` problems (none would
    be left to train the tuning trials on), or None."""
    if tune.selection_problems < train:
        return None
    return (
        f"tune: selection_problems={tune.selection_problems:,} leaves none of task {task!r}'s "
        f"{train:,} train problems to train the tuning trials on (the selection split is held "
        f"out of the train split): use at most {train - 1:,}"
    )


def tuned(spec: TrialSpec, values: Mapping[str, Any]) -> TrialSpec:
    """`spec` with `values` in its Optim or Algorithm (each by where the field lives)."""
    by_target: dict[str, dict[str, Any]] = {"optim": {}, "algorithm": {}}
    for name, value in values.items():
        by_target[target_of(name)][name] = value
    return dataclasses.replace(
        spec,
        algorithm=dataclasses.replace(spec.algorithm, **by_target["algorithm"]),
        optim=dataclasses.replace(spec.optim, **by_target["optim"]),
    )


def retuned(trials: Sequence[Any], chosen: Mapping[str, Mapping[str, Any]]) -> list[Any]:
    """`trials` (`Trial`s) with each arm's `chosen` values (an arm not in it unchanged)."""
    return [type(t)(t.arm, tuned(t.spec, chosen[t.arm])) if t.arm in chosen else t for t in trials]


def tuning_spec(final: TrialSpec, tune: TuneSpec, study_name: str, seed: int) -> TrialSpec:
    """The tuning trial of `final`'s arm at `seed` (before its values are applied): `tune.steps`
    steps on the task with its selection split held out, evaluated once, at the end, on it."""
    options = (("held", tune.selection_problems), ("of", final.task))
    options += (("of_options", tuple(sorted(dict(final.task_options).items()))),)
    return dataclasses.replace(
        final,
        task=SELECTION_TASK,
        task_options=options,
        seed=seed,
        budget=dataclasses.replace(final.budget, max_steps=tune.steps, max_generated_tokens=None),
        eval=EvalSpec(
            at_start=False,
            n_samples=final.eval.n_samples,
            ks=(1,),
            temperature=final.eval.temperature,
        ),
        checkpoint_every=0,
        study=f"{study_name}-tune",
    )


def shared_setting(optim: Optim, algorithm: Algorithm, names: Sequence[str]) -> dict[str, Any]:
    """The values of `names` every arm shares when it is not tuned."""
    return {n: getattr(optim if target_of(n) == "optim" else algorithm, n) for n in names}


__all__ = [
    "Range",
    "TuneSpec",
    "linear_range",
    "log_range",
    "retuned",
    "tuned",
    "tuning_spec",
]
