"""The options of launcher "slurm" (`ablate.study.slurm`, which registers it): plain values a
study file imports without loading the launcher (`from ablate.study import SlurmOptions`),
checked when they are built (`ablate.factors.fields`): a bad one is one `ConfigError` before
anything is created or submitted."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from ablate.base.errors import ConfigError
from ablate.factors.fields import Rule, record_problems

#: sbatch options the launcher writes itself (through submitit), and what to use instead: the
#: array's shape (one task per trial), its logs and the requeue signal are what exactly-once and
#: resume rely on; the others are options of their own.
OWNED = {
    "array": "the launcher submits one array task per trial (array_parallelism caps how many "
    "run at once)",
    "output": "the launcher writes each task's log to RESULTS/<study>/slurm/logs/",
    "error": "the launcher writes each task's log to RESULTS/<study>/slurm/logs/",
    "open-mode": "the launcher appends to each task's log (a requeued task keeps its past)",
    "signal": "the launcher asks for USR2 before the time limit, to requeue the task",
    "job-name": "the launcher names the array ablate-<study>",
    "wckey": "the launcher (submitit) writes it",
    "nodes": "one trial is one task on one node",
    "ntasks": "one trial is one task",
    "ntasks-per-node": "one trial is one task",
    "partition": "use SlurmOptions(partition=...)",
    "time": "use SlurmOptions(time_min=...)",
    "cpus-per-task": "use SlurmOptions(cpus_per_task=...)",
    "gpus-per-task": "use SlurmOptions(gpus_per_task=...)",
    "mem": "use SlurmOptions(mem_gb=...)",
}
#: sbatch's one-letter spellings of the options above.
SHORT = {
    "a": "array",
    "o": "output",
    "e": "error",
    "J": "job-name",
    "N": "nodes",
    "n": "ntasks",
    "p": "partition",
    "t": "time",
    "c": "cpus-per-task",
}
#: Options whose abbreviations sbatch also accepts (`--arr=0-9` is `--array`).
_ABBREVIATED = ("array", "output", "error", "job-name", "open-mode", "signal")


def sbatch_key_problem(key: str) -> str | None:
    """Why `key` cannot be an extra sbatch option (None: it can): not an option's name, or one
    the launcher writes itself, however spelled (`--array`, `job_name`, `J`, `arr`)."""
    name = key.lstrip("-")
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        return "not an sbatch option's name (e.g. account, qos, constraint)"
    name = SHORT.get(name, name.replace("_", "-").lower())
    owned = name if name in OWNED else None
    if owned is None and len(name) >= 2:
        owned = next((o for o in _ABBREVIATED if o.startswith(name)), None)
    if owned is None:
        return None
    return f"--{owned} is the launcher's own: {OWNED[owned]}"


@dataclass(frozen=True, kw_only=True)
class SlurmOptions:
    """What each array task asks Slurm for (one task trains one trial)."""

    partition: str | None = None
    """Slurm partition (None: the cluster's default)."""
    gpus_per_task: int | None = None
    """GPUs per trial; None = 1 for studies on a GPU (device="cuda...", or engine="vllm" with a
    trainer not on the CPU), else 0 (vLLM's CPU build beside a CPU trainer)."""
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
    """Any other sbatch option, e.g. {"account": "rl", "qos": "high", "constraint": "h100"}
    (not one the launcher writes itself: `OWNED`)."""

    RULES: ClassVar[dict[str, Rule]] = {
        "partition": Rule(nonempty=True, note="None: the cluster's default"),
        "gpus_per_task": Rule(low=0),
        "cpus_per_task": Rule(low=1),
        "time_min": Rule(low=1),
        "array_parallelism": Rule(low=1),
        "mem_gb": Rule(above=0),
        "max_requeues": Rule(low=0),
        "sbatch": Rule(keys=sbatch_key_problem),
    }

    def __post_init__(self) -> None:
        if isinstance(self.sbatch, Mapping):
            object.__setattr__(self, "sbatch", dict(self.sbatch))
        if problems := record_problems(self):
            raise ConfigError("; ".join(problems))

    def gpus_for(self, engines: Collection[str], device: str) -> int:
        """GPUs one task requests for a study whose trials sample with `engines` on `device`:
        one on CUDA, or for vLLM unless the trainer is on the CPU (then vLLM's CPU build)."""
        if self.gpus_per_task is not None:
            return self.gpus_per_task
        on_gpu = device.startswith("cuda") or ("vllm" in engines and device != "cpu")
        return 1 if on_gpu else 0
