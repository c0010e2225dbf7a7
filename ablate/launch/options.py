"""The launcher a study runs under, as a `Study(launch=...)` field or `ablate run` options:
plain values, checked here (a bad one is a `ConfigError` before anything is submitted)."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ablate.base.errors import ConfigError

LAUNCHERS = ("local", "slurm")


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    """What each array task asks Slurm for (one task trains one trial)."""

    partition: str | None = None
    """Slurm partition (None: the cluster's default)."""
    gpus_per_task: int | None = None
    """GPUs per trial; None = 1 for studies on a GPU (engine="vllm" or device="cuda..."), else 0."""
    cpus_per_task: int = 1
    """CPU cores per trial (also the trial's torch threads)."""
    time_min: int = 120
    """Wall-clock limit of one task in minutes; a task past it is requeued and resumes."""
    array_parallelism: int | None = None
    """At most this many tasks of the array run at once (None: as many as Slurm schedules)."""
    mem_gb: float | None = None
    """Memory per task (None: the partition's default)."""
    max_requeues: int = 3
    """Requeues after a timeout or preemption before the task gives up (submitit's count)."""
    sbatch: Mapping[str, str] = field(default_factory=dict)
    """Any other sbatch option, e.g. {"account": "rl", "qos": "high", "constraint": "h100"}."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sbatch", dict(self.sbatch))
        for name in ("gpus_per_task", "array_parallelism", "mem_gb"):
            value = getattr(self, name)
            if value is not None and value < (0 if name == "gpus_per_task" else 1):
                raise ConfigError(f"slurm option {name}={value!r}: must be positive")
        for name in ("cpus_per_task", "time_min"):
            if getattr(self, name) < 1:
                raise ConfigError(f"slurm option {name}={getattr(self, name)!r}: must be >= 1")
        if self.max_requeues < 0:
            raise ConfigError(f"slurm option max_requeues={self.max_requeues}: must be >= 0")

    def gpus_for(self, engine: str, device: str) -> int:
        """GPUs one task requests for a study with this engine and device."""
        if self.gpus_per_task is not None:
            return self.gpus_per_task
        return 1 if engine == "vllm" or device.startswith("cuda") else 0


@dataclass(frozen=True, kw_only=True)
class Launch:
    """`Study(launch=Launch(launcher="slurm", slurm=SlurmOptions(partition="gpu")))`: how
    `ablate run` (and so `make study`) runs the study unless its command line says otherwise."""

    launcher: str = "local"
    """"local" (this machine) or "slurm" (one job array, one task per trial)."""
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    detach: bool = False
    """slurm: return once the array is submitted (`ablate status` follows it) instead of waiting."""

    def __post_init__(self) -> None:
        if self.launcher not in LAUNCHERS:
            raise ConfigError(f"launcher {self.launcher!r}: use one of {', '.join(LAUNCHERS)}")
        if not isinstance(self.slurm, SlurmOptions):
            raise ConfigError("Launch(slurm=...) takes a SlurmOptions(...)")
        if self.detach and self.launcher == "local":
            raise ConfigError("--detach needs --launcher slurm (a local run is this process)")


def resolve(base: Launch | None, launcher: str = "", detach: bool = False, **slurm: Any) -> Launch:
    """The study's `launch` with the command line's choices over it (an empty or None option
    keeps the study's value)."""
    base = base or Launch()
    given = {k: v for k, v in slurm.items() if v not in (None, "")}
    options = dataclasses.replace(base.slurm, **given)
    return Launch(launcher=launcher or base.launcher, slurm=options, detach=detach or base.detach)


def check_slurm_reachable() -> None:
    """`--launcher slurm` needs Slurm's client commands on this machine (a login node)."""
    missing = [c for c in ("sbatch", "squeue", "scancel") if shutil.which(c) is None]
    if missing:
        raise ConfigError(
            f"--launcher slurm: {', '.join(missing)} not found on PATH: run `ablate run` on a "
            "Slurm login node (or use --launcher local, or `ablate worker` on machines without "
            "Slurm)"
        )


def check_combination(launch: Launch, *, workers: int, until_decided: bool) -> None:
    if launch.launcher != "slurm":
        return
    if workers > 1:
        raise ConfigError(
            "--workers is for --launcher local; with slurm every trial is its own array task "
            "(--slurm-array-parallelism caps how many run at once)"
        )
    if until_decided:
        raise ConfigError("--until-decided runs with --launcher local only")
