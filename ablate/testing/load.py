"""`busy_machine`: CPU load a test induces on every core, to show a result does not depend on it.

The load is spinning processes (several per core), started before the block and killed after it,
whatever the block raised. A process each, not threads: the GIL would serialise threads, and
a spinning process competes with the one under test exactly as another user's job does.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

#: Spinning processes per core: a load of about 8x the cores, the 8-15 (on 2 cores) that broke a
#: wall-clock verifier, and light enough that a test under it still ends in seconds.
PER_CORE = 8
_SPIN = "while True: pass"


def cores() -> int:
    """The cores this process may run on (its affinity, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def busy_machine(per_core: int = PER_CORE) -> Iterator[int]:
    """Keep `per_core` spinning processes per core running for the block; yields their count."""
    spinners: list[subprocess.Popen] = []
    try:
        for _ in range(per_core * cores()):
            spinners.append(
                subprocess.Popen(
                    [sys.executable, "-S", "-c", _SPIN],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield len(spinners)
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()


def cpu_share(cpu_seconds: float = 0.2) -> float:
    """CPU seconds per wall second this thread gets while spinning for `cpu_seconds` of CPU:
    about 1 on an idle core, at most about 1 / (1 + per_core) inside `busy_machine`."""
    wall_start, cpu_start = time.perf_counter(), time.thread_time()
    while time.thread_time() - cpu_start < cpu_seconds:
        pass
    return (time.thread_time() - cpu_start) / (time.perf_counter() - wall_start)


def main(argv: list[str] | None = None) -> int:
    """`python -m ablate.testing.load [--per-core N] -- COMMAND...`: COMMAND under the load
    (`make test-loaded`); exits with COMMAND's code."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m ablate.testing.load", description=main.__doc__)
    parser.add_argument("--per-core", type=int, default=PER_CORE)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.per_core < 1:
        parser.error("give --per-core >= 1 and a command after --")
    with busy_machine(args.per_core) as spinners:
        print(f"{spinners} spinning processes on {cores()} cores: {' '.join(command)}", flush=True)
        return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
