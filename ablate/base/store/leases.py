"""The lease port: where a study's trial leases live, so that however many runners share a study
each trial is trained by one process at a time (`ablate.study.lease.TrialLease` drives it).

A `LeaseTable` holds one row (key, owner, expiry) per leased trial, in a place every runner of the
study reaches; every change is a compare-and-set. A store says where its leases live by
implementing `LeasePort` (the file store in its folder, MLflow beside its sqlite database or in
its PostgreSQL database); for a store without it they live in `leases.db` in the results folder
(`ablate.tracking.leases_of`). The SQL table behind both is `ablate.tracking.sql_leases`.

An owner is `host:pid:nonce` (`owner_id`): a table may take over at once the lease of an owner
that is a process of this machine no longer alive (`owner_is_dead`), so that rerunning after
`kill -9` resumes immediately.
"""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path
from typing import Protocol, runtime_checkable

#: Seconds a lease lives without renewal; its holder renews it every TTL / 6.
TTL = 60.0


def owner_id() -> str:
    """host:pid:nonce — the nonce tells two leases of one (reused) pid apart."""

    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    try:  # a killed child its parent has not reaped yet is a zombie: dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def owner_is_dead(owner: str) -> bool:
    """True only for an owner on this machine whose process no longer exists."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return host == socket.gethostname() and pid.isdigit() and _process_gone(int(pid))


@runtime_checkable
class LeaseTable(Protocol):
    """Trial leases in one place: a row per key, taken, renewed and released by compare-and-set.
    Building one touches nothing; the first call creates what it needs."""

    url: str  # where the table lives (e.g. a SQLAlchemy URL), as error messages name it

    def problem(self) -> str | None:
        """Why the table cannot be used, in one line (checked before compute; touches nothing)."""
        ...

    def holder(self, key: str) -> tuple[str, float] | None:
        """(owner, expiry time) of the lease of `key`, or None when nobody holds it."""
        ...

    def acquire(self, key: str, owner: str, ttl: float = TTL) -> str | None:
        """Take the lease of `key` for `owner`: None when taken, else its live holder. An
        expired lease, or one whose owner is dead, is taken over."""
        ...

    def renew(self, key: str, owner: str, ttl: float = TTL) -> bool:
        """Extend `owner`'s lease; False when someone else holds it now."""
        ...

    def release(self, key: str, owner: str) -> None:
        """Drop `owner`'s lease of `key` (nothing when another owner holds it)."""
        ...

    def is_failure(self, exc: BaseException) -> bool:
        """Whether `exc` is this table's database failing (the study stops with one line naming
        `url`), not a trial's error."""
        ...


@runtime_checkable
class LeasePort(Protocol):
    """A store that keeps its trial leases in a place of its own."""

    def leases(self, results_root: Path) -> LeaseTable:
        """The lease table of this store's studies (`results_root`: the results folder, for a
        store whose leases live there)."""
        ...
