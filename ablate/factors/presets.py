"""Load the published presets of `baselines/` by name."""

from __future__ import annotations

import importlib
import pkgutil

import baselines
from ablate.base.errors import ConfigError
from ablate.factors.algorithms import Algorithm


def baseline_names() -> tuple[str, ...]:
    """Names of the presets shipped in `baselines/` (e.g. 'grpo', 'dapo')."""

    return tuple(sorted(m.name for m in pkgutil.iter_modules(baselines.__path__)))


def baseline(name: str) -> Algorithm:
    """The preset `name` from `baselines/<name>.py`, e.g. `baseline("dapo")`; or a framework's
    default vector for one of its algorithm names, `"grpo@nemo_rl"` (`ablate.peers.aliases`)."""
    if "@" in name:
        from ablate.peers.aliases import alias_algorithm

        return alias_algorithm(name)
    names = baseline_names()
    if name not in names:
        raise ConfigError(f"unknown preset {name!r}; valid: {', '.join(names)}")
    algo = importlib.import_module(f"baselines.{name}").ALGORITHM
    if not isinstance(algo, Algorithm):
        raise ConfigError(f"baselines/{name}.py must define ALGORITHM = Algorithm(...)")
    return algo
