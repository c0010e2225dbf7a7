"""The launcher a study runs under, as a `Study(launch=...)` field or `ablate run` options: a
registered launcher's name and its options record, checked here by the one record pass
(`ablate.factors.fields.record_problems`: each field's type and declared rules; a bad one is a
one-line `ConfigError` before anything is created or submitted)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import InitVar, dataclass
from typing import Any

from ablate.base.errors import ConfigError
from ablate.factors.fields import record_problems
from ablate.launch.option_values import set_options
from ablate.launch.registry import detach_refused, launcher_entry


@dataclass(frozen=True, kw_only=True)
class Launch:
    """`Study(launch=Launch(launcher="slurm", options=SlurmOptions(partition="gpu")))`: how
    `ablate run` (and so `make study`) runs the study unless its command line says otherwise."""

    launcher: str = "local"
    """A registered launcher: "local" (this machine), "slurm" (one job array, one task per
    trial) or one of your own (`ablate.launch.registry`)."""
    options: Any = None
    """That launcher's options record, e.g. `SlurmOptions(...)`; None = its defaults."""
    detach: bool = False
    """Return once the trials are submitted (`ablate status` follows them) instead of waiting;
    for a launcher that submits (slurm)."""
    slurm: InitVar[Any] = None
    """The earlier spelling of `options` for launcher "slurm": `Launch(launcher="slurm",
    slurm=SlurmOptions(...))` (kept for existing study files)."""

    def __post_init__(self, slurm: Any) -> None:
        entry = launcher_entry(self.launcher)
        if slurm is not None:
            if self.options is not None:
                raise ConfigError("Launch: give the launcher's options once, as options=...")
            object.__setattr__(self, "options", slurm)
        if self.options is None:
            object.__setattr__(self, "options", entry.options())
        if not isinstance(self.options, entry.options):
            raise ConfigError(
                f"Launch(launcher={self.launcher!r}) takes options={entry.options.__name__}(...), "
                f"not {type(self.options).__name__}"
            )
        if self.detach and not entry.detach:
            raise ConfigError(detach_refused(entry))
        if problems := record_problems(self):  # the options record's fields, by their types
            raise ConfigError("; ".join(problems))


def resolve(
    base: Launch | None, launcher: str = "", detach: bool = False, items: Sequence[str] = ()
) -> Launch:
    """The study's `launch` with the command line's choices over it: `launcher` (empty: the
    study's), `detach`, and `key=value` `items` over the options (the study's when the launcher
    is the study's, else the launcher's defaults)."""
    base = base or Launch()
    name = launcher or base.launcher
    same = name == base.launcher
    options = base.options if same else launcher_entry(name).options()
    options = set_options(options, items, launcher=name)
    return Launch(launcher=name, options=options, detach=detach or (same and base.detach))
