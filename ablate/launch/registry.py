"""Launchers by name: where `ablate run` trains a study's trials once its setup is done.

A launcher is one registration: its name, its options record (a frozen keyword-only dataclass,
`Launch(options=...)` and `ablate run --launcher-opt key=value`), what it accepts of `ablate run`'s
own options (`--workers`, `--until-decided`, `--detach`), a check of what it needs to reach (run
before anything is created), and `build`, which returns the runner's `launch` callable
(`ablate.study.runner.Launcher`: trials, store URI, results root, hooks -> outcomes, or None once
submitted and detached). The shipped launchers register themselves when their module is first
imported, which a lookup of their name does (`BUILT_IN`); a launcher of your own registers itself
the same way when its module is imported, e.g. by the study file:

    @register_launcher("ray", options=RayOptions, summary="a Ray cluster, one task per trial")
    def build(request: LaunchRequest) -> Launcher: ...
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ablate.base.errors import ConfigError

#: The shipped launchers -> the module that registers each. Named, not imported: those modules
#: import this registry (Slurm's sits floors above, beside the runner it calls), and a
#: launcher's code loads only when its name is looked up, so `import ablate` and `ablate --help`
#: do not pay for it.
BUILT_IN = {"local": "ablate.launch.local", "slurm": "ablate.study.slurm"}


@dataclass(frozen=True, kw_only=True)
class LaunchRequest:
    """What a launcher's `build` gets for one `ablate run`."""

    study_file: str
    """The study's file (a launcher on other machines loads the study from it)."""
    study: Any
    """The loaded `ablate.study.Study` (not imported: the study module sits on this registry)."""
    options: Any
    """The launcher's options record: the study's `Launch.options`, the command line's over them."""
    detach: bool = False
    """Return once the trials are submitted (only for a launcher registered with `detach=True`)."""
    echo: Callable[[str], None] = print
    """Where the launcher writes its progress lines (the CLI's timestamped lines)."""


#: `build`: the runner's `launch` for a request, or None for the runner's own local path.
Build = Callable[[LaunchRequest], Any]


@dataclass(frozen=True, kw_only=True)
class LauncherEntry:
    """One registered launcher."""

    name: str
    """Its name: `ablate run --launcher NAME`, `Launch(launcher=NAME)`."""
    options: type
    """Its options record: a frozen keyword-only dataclass whose fields all have defaults."""
    build: Build
    """The runner's `launch` callable for a request (None: the runner trains the trials here)."""
    summary: str
    """One line for the help: where the trials run."""
    check: Callable[[Any], None] | None = None
    """Given the options, raises `ConfigError` when what the launcher needs is out of reach (e.g.
    Slurm's commands); `ablate run` calls it before anything is created or submitted."""
    workers: bool = False
    """Whether `--workers N` applies (the trials share N processes on this machine)."""
    until_decided: bool = False
    """Whether `--until-decided` applies (each look's outcomes come back before the next)."""
    detach: bool = False
    """Whether `--detach` applies (`build`'s callable returns None once the trials are submitted
    instead of waiting for them)."""
    instead_of_workers: str = ""
    """What takes the place of `--workers`, said when `--workers` is refused."""


_ENTRIES: dict[str, LauncherEntry] = {}


def register_launcher(
    name: str,
    *,
    options: type,
    summary: str,
    check: Callable[[Any], None] | None = None,
    workers: bool = False,
    until_decided: bool = False,
    detach: bool = False,
    instead_of_workers: str = "",
) -> Callable[[Build], Build]:
    """Decorator: register `build` as launcher `name` (the other arguments: `LauncherEntry`'s
    fields). A second registration of a name, or an options type that is not a frozen
    keyword-only dataclass constructible without arguments, is a programming error."""
    _check_options_type(name, options)

    def add(build: Build) -> Build:
        if name in _ENTRIES:
            raise ValueError(f"launcher {name!r} is registered twice")
        _ENTRIES[name] = LauncherEntry(
            name=name,
            options=options,
            build=build,
            summary=summary,
            check=check,
            workers=workers,
            until_decided=until_decided,
            detach=detach,
            instead_of_workers=instead_of_workers,
        )
        return build

    return add


def _check_options_type(name: str, options: type) -> None:
    params = getattr(options, "__dataclass_params__", None)
    if params is None or not params.frozen or not all(f.kw_only for f in _fields(options)):
        raise ValueError(f"launcher {name!r}: options must be a frozen keyword-only dataclass")
    required = [f.name for f in _fields(options) if _no_default(f)]
    if required:
        raise ValueError(f"launcher {name!r}: options field(s) {required} need a default")


def _fields(options: type) -> tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(options) if f.init)


def _no_default(f: dataclasses.Field) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def launcher_names() -> tuple[str, ...]:
    """Every launcher a lookup can find: the shipped ones, then those registered since."""
    return tuple(dict.fromkeys([*BUILT_IN, *_ENTRIES]))


def launcher_entry(name: str) -> LauncherEntry:
    """The launcher registered as `name` (a shipped one's module imported on first lookup);
    an unknown name is a one-line `ConfigError` listing the valid ones."""
    if name not in _ENTRIES and name in BUILT_IN:
        importlib.import_module(BUILT_IN[name])  # registers it
    entry = _ENTRIES.get(name)
    if entry is None:
        import difflib

        close = difflib.get_close_matches(name, launcher_names(), n=1, cutoff=0.6)
        maybe = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"unknown launcher {name!r}{maybe}; valid: {', '.join(launcher_names())} (a launcher "
            "of your own registers itself when its module is imported, e.g. by the study file)"
        )
    return entry


def launcher_entries() -> list[LauncherEntry]:
    """Every launcher, the shipped ones imported (for a message that names those that can)."""
    return [launcher_entry(name) for name in launcher_names()]


def option_names(options: type) -> tuple[str, ...]:
    """The keys `--launcher-opt` takes for an options record."""
    return tuple(f.name for f in _fields(options))


def check_run(
    entry: LauncherEntry, options: Any, *, workers: int, until_decided: bool, detach: bool
) -> None:
    """`ablate run`'s own options against what the launcher accepts, then the launcher's check of
    what it needs to reach: a `ConfigError` before anything is created or submitted."""
    if workers > 1 and not entry.workers:
        instead = entry.instead_of_workers or "the launcher places the trials itself"
        raise ConfigError(
            f"--workers is for {_those(lambda e: e.workers)}; with {entry.name} {instead}"
        )
    if until_decided and not entry.until_decided:
        raise ConfigError(f"--until-decided runs with {_those(lambda e: e.until_decided)} only")
    if until_decided and detach:
        raise ConfigError(
            "--until-decided reads each look's results before the next, so it cannot --detach"
        )
    if entry.check is not None:
        entry.check(options)


def detach_refused(entry: LauncherEntry) -> str:
    """Why `--detach` is refused with a launcher that waits for its trials."""
    return (
        f"--detach needs {_those(lambda e: e.detach)} (one that submits the trials and returns); "
        f"--launcher {entry.name} trains them before `ablate run` returns"
    )


def _those(accepts: Callable[[LauncherEntry], bool]) -> str:
    names = [e.name for e in launcher_entries() if accepts(e)]
    return " or ".join(f"--launcher {n}" for n in names) or "another launcher"
