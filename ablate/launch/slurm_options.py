"""The options of launcher "slurm" (`ablate.launch.slurm`, which registers it): plain values a
study file imports without loading the launcher (`from ablate.study import SlurmOptions`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ablate.base.errors import ConfigError


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
