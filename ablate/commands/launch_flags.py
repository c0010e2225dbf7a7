"""`ablate run`'s launcher options: `--launcher NAME`, `--launcher-opt key=value` (repeatable),
`--detach`, and the `--slurm-*` flags (README "Past one machine: Slurm"), each an alias of a
`--launcher-opt`. They are resolved over the study's `launch` and checked, with the launcher's own
check, before anything is created or submitted; nothing here knows one launcher from another."""

from __future__ import annotations

from typing import Any

import typer

from ablate.base.errors import ConfigError
from ablate.launch.registry import launcher_names

LAUNCHER = typer.Option(
    "",
    help=f"where the trials run: {', '.join(launcher_names())}, or a launcher the study file "
    "registers (default: the study's launch, else local)",
)
LAUNCHER_OPT = typer.Option(
    None,
    "--launcher-opt",
    metavar="<key=value>",
    help="key=value: an option of the launcher, typed by its options record (repeatable), "
    "e.g. partition=gpu or sbatch.account=rl for slurm",
)
DETACH = typer.Option(False, "--detach", help="slurm: return once submitted (see ablate status)")
PARTITION = typer.Option("", help="slurm: partition of the array's tasks (= option partition)")
GPUS = typer.Option(
    None, min=0, help="slurm: GPUs per trial (default 1 on cuda, or vllm off the cpu, else 0)"
)
CPUS = typer.Option(None, min=1, help="slurm: CPU cores per trial (default 1; = cpus_per_task)")
TIME = typer.Option(
    None, min=1, help="slurm: minutes per task (default 120; then requeued; = time_min)"
)
PARALLEL = typer.Option(
    None, min=1, help="slurm: at most this many trials at once (= array_parallelism)"
)

#: Each `--slurm-*` flag, by its parameter name -> (the launcher it is for, the option it sets).
ALIASES = {
    "slurm_partition": ("slurm", "partition"),
    "slurm_gpus_per_task": ("slurm", "gpus_per_task"),
    "slurm_cpus_per_task": ("slurm", "cpus_per_task"),
    "slurm_time": ("slurm", "time_min"),
    "slurm_array_parallelism": ("slurm", "array_parallelism"),
}


def resolve_launch(
    loaded,
    *,
    launcher: str,
    launcher_opt: list[str] | None,
    detach: bool,
    workers: int,
    until_decided: bool,
    **flags: Any,
):
    """The study's `launch` with the command line's over it (the `--slurm-*` aliases among
    `flags`, `ablate run`'s other options, first; then the `--launcher-opt`s), checked against
    `--workers` and `--until-decided` and by the launcher's own check (e.g. Slurm's commands on
    PATH)."""
    from ablate.launch.options import resolve
    from ablate.launch.registry import check_run, launcher_entry

    name = launcher or (loaded.launch.launcher if loaded.launch is not None else "local")
    aliases = {flag: value for flag, value in flags.items() if flag in ALIASES}
    items = [*alias_items(name, aliases), *(launcher_opt or [])]
    launch = resolve(loaded.launch, launcher, detach, items)
    entry = launcher_entry(launch.launcher)
    check_run(
        entry, launch.options, workers=workers, until_decided=until_decided, detach=launch.detach
    )
    return launch


def alias_items(launcher: str, aliases: dict[str, Any]) -> list[str]:
    """The `key=value` items the given `--slurm-*` flags stand for (unset ones: none)."""
    items = []
    for flag, value in aliases.items():
        if value in (None, ""):
            continue
        owner, key = ALIASES[flag]
        if owner != launcher:
            raise ConfigError(
                f"--{flag.replace('_', '-')} is an option of --launcher {owner}; this run's "
                f"launcher is {launcher}"
            )
        items.append(f"{key}={value}")
    return items


def runner_launch(study_file: str, study, launch):
    """`run_study`'s `launch`: the launcher's callable, its lines timestamped on stdout (None:
    the runner trains the trials here)."""
    from ablate.commands.progress import say
    from ablate.launch.registry import LaunchRequest, launcher_entry

    request = LaunchRequest(
        study_file=study_file,
        study=study,
        options=launch.options,
        detach=launch.detach,
        echo=say,
    )
    return launcher_entry(launch.launcher).build(request)
