"""A trial's lease for this process: however many `ablate run` / `ablate worker` processes share a
study, each trial is trained by one process at a time.

The lease lives in the store's lease table (the lease port, `ablate.base.store.leases`; a runner
gets it with `ablate.tracking.leases_of(store, results_root)`: MLflow's PostgreSQL database
itself, `leases.db` beside a sqlite one or in the file store's folder, else in the results
folder). A runner takes a trial's lease before touching its run or checkpoints and renews it from
a heartbeat thread; another runner skips a leased trial. A runner that died stops renewing, and
its lease is taken over once expired — at once when its owner is a process of this machine that
no longer exists (so rerunning after `kill -9` resumes immediately).

Fencing: the holder treats its lease as valid only until `TTL * SAFE` after its last renewal,
earlier than anyone else may take it over; past that (the database unreachable, the process
stalled) `check()` raises `LeaseLost` and the holder stops writing before a successor starts.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from ablate.base.store.leases import TTL, LeaseTable, owner_id, owner_is_dead

# who holds a lease, as the runners read it (`slurm_array` asks whether a holder is alive here)
__all__ = ["SAFE", "TTL", "LeaseLost", "TrialLease", "owner_id", "owner_is_dead"]

#: Fraction of TTL after the last renewal during which the holder still writes.
SAFE = 0.75


class LeaseLost(RuntimeError):
    """This process no longer holds the trial's lease: another runner may be training it."""


class TrialLease:
    """One trial's lease for this process: `acquire()`, then `check()` before every write,
    `release()` at the end. Renewed by a daemon thread while held (`heartbeat=False`: by whoever
    calls `beat()`, as tests do with a `clock` they advance themselves)."""

    def __init__(
        self,
        store: LeaseTable,
        key: str,
        *,
        ttl: float = TTL,
        clock: Callable[[], float] = time.monotonic,
        heartbeat: bool = True,
    ) -> None:
        self.store, self.key, self.ttl = store, key, ttl
        self._clock, self._heartbeat = clock, heartbeat
        self.owner = owner_id()
        self._valid_until = 0.0
        self._lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> str | None:
        """None when this process now holds the lease, else who does."""
        holder = self.store.acquire(self.key, self.owner, self.ttl)
        if holder is None:
            self._valid_until = self._clock() + self.ttl * SAFE
            if self._heartbeat:
                self._thread = threading.Thread(target=self._beat_until_stopped, daemon=True)
                self._thread.start()
        return holder

    def _beat_until_stopped(self) -> None:
        while not self._stop.wait(self.ttl / 6) and self.beat():
            pass

    def beat(self) -> bool:
        """Renew the lease once; False once it is lost (someone else holds it)."""
        try:
            renewed_at = self._clock()
            if not self.store.renew(self.key, self.owner, self.ttl):
                self._lost = True
                return False
            self._valid_until = renewed_at + self.ttl * SAFE
        except Exception:  # the database is unreachable: `check` fails once the lease ages
            pass
        return True

    def check(self) -> None:
        """Raise LeaseLost unless this process still safely holds the lease."""
        if self._lost or self._clock() > self._valid_until:
            raise LeaseLost(f"lease of {self.key} lost (held by {self.owner} until it expired)")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self._lost:
            with contextlib.suppress(Exception):  # else it expires by itself
                self.store.release(self.key, self.owner)
