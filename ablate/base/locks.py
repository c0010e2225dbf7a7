"""A lock among the processes of one machine, on a file: what the runner's set-up and the file
store's writes serialise on. The kernel releases it when its holder dies, so a killed process
never leaves it held; a process that has to wait for it says so every few seconds
(`ablate.base.waits`) instead of sitting silent."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path

from ablate.base.waits import waiting


@contextlib.contextmanager
def file_lock(path: str | Path, what: str = "") -> Iterator[None]:
    """Hold an exclusive lock on `path` (created, with its folder, when missing); `what` names
    the lock in the notices of a long wait (default: the lock file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held = what or f"the lock {path}"
            with waiting(f"{held}, which another process of this machine holds"):
                fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
