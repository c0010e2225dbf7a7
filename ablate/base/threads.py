"""How many torch threads a command should use.

OpenMP threads spin-wait for each other at every parallel region, so a thread that lands on a
core another process keeps busy stalls all of them: on a 2-core machine with one core busy, a
study step took 17–19 s with 2 torch threads and 0.5–0.8 s with 1. ablate therefore counts the
cores that are free *now* and never asks for more threads than that.

Rule: an explicit request (`--threads`, then `OMP_NUM_THREADS`) wins; otherwise
`max(1, min(cores // workers, cores - busy))`, where `cores` are the ones this process may run
on and `busy` the ones other processes keep busy, the larger of the 1-minute load average and a
0.2 s sample of /proc/stat (the load average takes a minute to notice a process that just
started; the sample sees it at once).
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

SAMPLE_SECONDS = 0.2
_PROC_STAT = Path("/proc/stat")
_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def choose_threads(workers: int = 1, *, requested: int = 0) -> int:
    """Torch threads for each of `workers` processes; `requested` > 0 (a `--threads` option)
    is taken as given."""
    if requested > 0:
        return requested
    explicit = _env_threads()
    if explicit:
        return explicit
    cores = available_cores()
    share = max(1, cores // max(1, workers))
    if share == 1:
        return 1  # nothing to decide: skip the sample
    return max(1, min(share, cores - busy_cores(cores)))


def apply_threads(workers: int = 1, *, requested: int = 0) -> int:
    """`torch.set_num_threads(choose_threads(...))`; returns the count."""
    import torch

    threads = choose_threads(workers, requested=requested)
    torch.set_num_threads(threads)
    return threads


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by a cgroup CPU quota."""
    cpus = _affinity()
    cores = len(cpus) if cpus else os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(cores, quota)) if quota else cores


def busy_cores(cores: int) -> int:
    """Cores (of `cores`) that other processes keep busy, by load average and by a short sample."""
    return min(cores, max(_load_busy(cores), _sampled_busy()))


def _env_threads() -> int:
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "")))
    except ValueError:
        return 0


def _affinity() -> set[int]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return set()


def _cgroup_quota() -> int:
    try:
        quota, period = _CPU_MAX.read_text().split()[:2]
        return math.ceil(int(quota) / int(period))
    except (OSError, ValueError):  # no cgroup v2 limit ("max") or no such file
        return 0


def _load_busy(cores: int) -> int:
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0
    # the load average counts every CPU of the machine; a process pinned to fewer sees its share
    machine = os.cpu_count() or cores
    return int(load * cores / max(cores, machine))


def _sampled_busy(seconds: float = SAMPLE_SECONDS) -> int:
    """Busy cores among ours over `seconds`, from /proc/stat (0 where there is none)."""
    cpus = _affinity()
    before = _cpu_times(cpus)
    if not before:
        return 0
    time.sleep(seconds)
    after = _cpu_times(cpus)
    busy = total = 0
    for cpu, (idle0, all0) in before.items():
        idle1, all1 = after.get(cpu, (idle0, all0))
        busy += (all1 - all0) - (idle1 - idle0)
        total += all1 - all0
    if total <= 0:
        return 0
    return int(busy / total * len(before) + 0.5)


def _cpu_times(cpus: set[int]) -> dict[int, tuple[int, int]]:
    """{cpu: (idle + iowait jiffies, all jiffies)} for the given CPUs."""
    try:
        lines = _PROC_STAT.read_text().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu":
            continue
        cpu = int(name[3:])
        if cpus and cpu not in cpus:
            continue
        values = [int(v) for v in fields[:8]]  # guest time is already counted in user
        out[cpu] = (values[3] + values[4], sum(values))
    return out
