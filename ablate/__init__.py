"""ablate: compare and ablate GRPO-family RL algorithms for language models, with statistics.

The public API, all keyword-only dataclasses and builders::

    from ablate import Budget, EvalSpec, Study, arm, baseline

`Algorithm`, `baseline` and the errors are imported eagerly; the study names (`Study`, `arm`,
`Budget`, …) on first use, so `import ablate` stays light (no torch, no MLflow).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ablate.base.checkout import mount_presets
from ablate.base.errors import AblateError, ConfigError, StudyError
from ablate.factors.algorithms import Algorithm

mount_presets()  # `baselines/` as ablate.baselines in a checkout run uninstalled (PYTHONPATH=.)

from ablate.baselines import baseline, baseline_names  # noqa: E402

if TYPE_CHECKING:  # for type checkers and IDEs; at run time they load lazily (__getattr__)
    from ablate.factors.finding import Finding
    from ablate.study.study import (
        Budget,
        Cells,
        CurveSpec,
        ElicitSpec,
        EvalSpec,
        Optim,
        PassKSpec,
        Recipes,
        Study,
        TuneSpec,
        arm,
        full_factorial,
        linear_range,
        log_range,
        one_at_a_time,
        path,
    )

__version__ = "0.1.0"

#: Public names loaded on first use -> the module that defines them.
_LAZY = {
    name: "ablate.study.study"
    for name in (
        "Budget",
        "Cells",
        "CurveSpec",
        "ElicitSpec",
        "EvalSpec",
        "Optim",
        "PassKSpec",
        "Recipes",
        "Study",
        "TuneSpec",
        "arm",
        "full_factorial",
        "linear_range",
        "log_range",
        "one_at_a_time",
        "path",
    )
} | {"Finding": "ablate.factors.finding"}

__all__ = [
    "AblateError",
    "Algorithm",
    "Budget",
    "Cells",
    "ConfigError",
    "CurveSpec",
    "ElicitSpec",
    "EvalSpec",
    "Finding",
    "Optim",
    "PassKSpec",
    "Recipes",
    "Study",
    "StudyError",
    "TuneSpec",
    "__version__",
    "arm",
    "baseline",
    "baseline_names",
    "full_factorial",
    "linear_range",
    "log_range",
    "one_at_a_time",
    "path",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ablate' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
