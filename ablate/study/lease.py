"""Trial leases: however many `ablate run` / `ablate worker` processes share a study, each trial
is trained by one process at a time.

A lease is a row (study/trial key, owner, expiry) in a small table of a SQL database every
runner of the study reaches; the results store says which (`StudyStore.lease_url`: MLflow's
PostgreSQL database itself, `leases.db` beside a sqlite one or in the file store's folder). A
runner takes a trial's lease before touching its run or checkpoints and renews it from a
heartbeat thread; another runner skips a leased trial. A runner that died stops renewing, and its
lease is taken over once expired — at once when its owner is a process of this machine that no
longer exists (so rerunning after `kill -9` resumes immediately). Every change is a
compare-and-set on the row, so two runners can never both believe they hold it.

Fencing: the holder treats its lease as valid only until `TTL * SAFE` after its last renewal,
earlier than anyone else may take it over; past that (the database unreachable, the process
stalled) `check()` raises `LeaseLost` and the holder stops writing before a successor starts.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

TABLE = "ablate_trial_leases"
#: Seconds a lease lives without renewal; renewed every TTL / 6.
TTL = 60.0
#: Fraction of TTL after the last renewal during which the holder still writes.
SAFE = 0.75


class LeaseLost(RuntimeError):
    """This process no longer holds the trial's lease: another runner may be training it."""


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


@functools.lru_cache(maxsize=8)
def _tables(url: str) -> tuple[Any, Any]:
    import sqlalchemy as sa

    if url.startswith("sqlite:///"):
        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30}, poolclass=sa.pool.NullPool)
    else:
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    meta = sa.MetaData()
    table = sa.Table(
        TABLE,
        meta,
        sa.Column("lease_key", sa.String(400), primary_key=True),
        sa.Column("owner", sa.String(300), nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    try:
        meta.create_all(engine, checkfirst=True)
    except sa.exc.DatabaseError:  # another runner created it at the same moment
        if not sa.inspect(engine).has_table(TABLE):
            raise
    return engine, table


class LeaseStore:
    """The lease table at `url` (any SQLAlchemy URL; created on first use)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine, self._table = _tables(url)

    def holder(self, key: str) -> tuple[str, float] | None:
        import sqlalchemy as sa

        t = self._table
        with self._engine.begin() as conn:
            row = conn.execute(sa.select(t.c.owner, t.c.expires_at).where(t.c.lease_key == key))
            found = row.first()
        return None if found is None else (found[0], found[1])

    def acquire(self, key: str, owner: str, ttl: float = TTL) -> str | None:
        """Take the lease of `key` for `owner`; None when taken, else the live holder."""
        import sqlalchemy as sa

        t, now = self._table, time.time()
        current = self.holder(key)
        if current is None:
            try:
                row = {"lease_key": key, "owner": owner, "expires_at": now + ttl}
                with self._engine.begin() as conn:
                    conn.execute(sa.insert(t).values(**row))
                return None
            except sa.exc.IntegrityError:  # inserted by another runner just now
                current = self.holder(key)
                if current is None:
                    return self.acquire(key, owner, ttl)
        held_by, expires = current
        if held_by != owner and expires >= now and not owner_is_dead(held_by):
            return held_by
        if self._swap(key, current, owner, now + ttl):
            return None
        latest = self.holder(key)
        return latest[0] if latest else "another runner"

    def _swap(self, key: str, expected: tuple[str, float], owner: str, expires: float) -> bool:
        """Compare-and-set: the row becomes (owner, expires) only if it still is `expected`."""
        import sqlalchemy as sa

        t = self._table
        where = (t.c.lease_key == key, t.c.owner == expected[0], t.c.expires_at == expected[1])
        with self._engine.begin() as conn:
            done = conn.execute(sa.update(t).where(*where).values(owner=owner, expires_at=expires))
        return done.rowcount == 1

    def renew(self, key: str, owner: str, ttl: float = TTL) -> bool:
        """Extend `owner`'s lease; False when someone else holds it now."""
        import sqlalchemy as sa

        t = self._table
        with self._engine.begin() as conn:
            done = conn.execute(
                sa.update(t)
                .where(t.c.lease_key == key, t.c.owner == owner)
                .values(expires_at=time.time() + ttl)
            )
        return done.rowcount == 1

    def release(self, key: str, owner: str) -> None:
        import sqlalchemy as sa

        t = self._table
        with self._engine.begin() as conn:
            conn.execute(sa.delete(t).where(t.c.lease_key == key, t.c.owner == owner))


class TrialLease:
    """One trial's lease for this process: `acquire()`, then `check()` before every write,
    `release()` at the end. Renewed by a daemon thread while held."""

    def __init__(self, store: LeaseStore, key: str, *, ttl: float = TTL) -> None:
        self.store, self.key, self.ttl = store, key, ttl
        self.owner = owner_id()
        self._valid_until = 0.0
        self._lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> str | None:
        """None when this process now holds the lease, else who does."""
        holder = self.store.acquire(self.key, self.owner, self.ttl)
        if holder is None:
            self._valid_until = time.monotonic() + self.ttl * SAFE
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()
        return holder

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 6):
            try:
                renewed_at = time.monotonic()
                if not self.store.renew(self.key, self.owner, self.ttl):
                    self._lost = True
                    return
                self._valid_until = renewed_at + self.ttl * SAFE
            except Exception:  # the database is unreachable: `check` fails once the lease ages
                continue

    def check(self) -> None:
        """Raise LeaseLost unless this process still safely holds the lease."""
        if self._lost or time.monotonic() > self._valid_until:
            raise LeaseLost(f"lease of {self.key} lost (held by {self.owner} until it expired)")

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self._lost:
            with contextlib.suppress(Exception):  # else it expires by itself
                self.store.release(self.key, self.owner)
