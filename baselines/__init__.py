"""Published algorithms as `Algorithm` presets, one module each, every value cited.

Installed inside the package as `ablate.baselines` (pyproject's package-dir maps it to this
folder): load one by name with `ablate.baseline("dapo")`, or import it,
`from ablate.baselines.dapo import ALGORITHM`. Preset values live only here.

Floor 3 of the layout: the presets import the factor space (`ablate.factors`) and, for a
framework's spelling such as "grpo@nemo_rl", its alias table (`ablate.peers.aliases`); neither
imports them back.
"""

from __future__ import annotations

import importlib
import pkgutil

from ablate.base.errors import ConfigError
from ablate.factors.algorithms import Algorithm

if __name__ != "ablate.baselines":  # the repository root on sys.path: keep one copy of each
    raise ImportError(f"the presets are the package ablate.baselines; {__name__!r} is not it")


def baseline_names() -> tuple[str, ...]:
    """Names of the presets shipped in `baselines/` (e.g. 'grpo', 'dapo')."""

    return tuple(sorted(m.name for m in pkgutil.iter_modules(__path__)))


def baseline(name: str) -> Algorithm:
    """The preset `name` from `baselines/<name>.py`, e.g. `baseline("dapo")`; or a framework's
    default vector for one of its algorithm names, `"grpo@nemo_rl"` (`ablate.peers.aliases`)."""
    if "@" in name:
        from ablate.peers.aliases import alias_algorithm

        return alias_algorithm(name)
    names = baseline_names()
    if name not in names:
        raise ConfigError(f"unknown preset {name!r}; valid: {', '.join(names)}")
    algo = importlib.import_module(f"{__name__}.{name}").ALGORITHM
    if not isinstance(algo, Algorithm):
        raise ConfigError(f"baselines/{name}.py must define ALGORITHM = Algorithm(...)")
    return algo
