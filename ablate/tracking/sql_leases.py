"""The lease port's SQL adapter: `LeaseStore`, a `LeaseTable` in any database SQLAlchemy reaches
(a sqlite file beside a store or in the results folder, a store's own PostgreSQL database).

The table (`TABLE`: lease_key, owner, expires_at) is created on first use, not when the object
is built, so that naming a store's leases writes nothing before the checks that precede compute.
Every change is a compare-and-set on the row, so two runners can never both believe they hold it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ablate.base.sql_urls import sqlite_file_problem
from ablate.base.store.common import disk_failure, raised_by
from ablate.base.store.leases import TTL, owner_is_dead

TABLE = "ablate_trial_leases"
#: Errors of these packages are the lease database's.
_SQL_PACKAGES = ("sqlalchemy", "sqlite3", "psycopg2")


@functools.lru_cache(maxsize=8)
def _tables(url: str) -> tuple[Any, Any]:
    import sqlalchemy as sa

    from ablate.tracking.sql_waits import watch_sql

    watch_sql()
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

    def __init__(self, url: str, *, clock: Callable[[], float] = time.time) -> None:
        self.url = url
        # wall-clock seconds: expiry times are compared across processes and machines
        self._clock = clock

    @classmethod
    def in_folder(cls, folder: str | Path) -> LeaseStore:
        """The table in `leases.db` (sqlite) in `folder`."""
        return cls(f"sqlite:///{Path(folder).resolve() / 'leases.db'}")

    @property
    def _engine(self) -> Any:
        return _tables(self.url)[0]

    @property
    def _table(self) -> Any:
        return _tables(self.url)[1]

    def problem(self) -> str | None:
        return sqlite_file_problem(self.url)

    def is_failure(self, exc: BaseException) -> bool:
        return disk_failure(exc) or raised_by(exc, _SQL_PACKAGES)

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

        t, now = self._table, self._clock()
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
                .values(expires_at=self._clock() + ttl)
            )
        return done.rowcount == 1

    def release(self, key: str, owner: str) -> None:
        import sqlalchemy as sa

        t = self._table
        with self._engine.begin() as conn:
            conn.execute(sa.delete(t).where(t.c.lease_key == key, t.c.owner == owner))
