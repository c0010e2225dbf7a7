"""Waits said while they last (`ablate.base.waits`): a notice every few seconds of a wait on a
lock file or on a database another process holds, with a clock the test moves (no sleeps)."""

from __future__ import annotations

import contextlib
import fcntl
import sqlite3

import pytest

from ablate.base import locks, waits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> tuple[Clock, waits.Waits]:
    """This process's waits replaced by ones on a clock the test moves, with no thread."""
    clock = Clock()
    fake = waits.Waits(every=5.0, clock=clock)
    fake.threads = False
    monkeypatch.setattr(waits, "WAITS", fake)
    return clock, fake


def test_a_wait_is_said_every_few_seconds_while_it_lasts(clock):
    clock, said = clock
    with said.waiting("the lock X"):
        clock.now += 4.9
        assert said.due() == []
        clock.now += 0.1
        assert said.due() == ["still waiting for the lock X: 5 s so far"]
        clock.now += 3
        assert said.due() == []  # said 3 s ago
        clock.now += 2
        assert said.due() == ["still waiting for the lock X: 10 s so far"]
    clock.now += 60
    assert said.due() == []  # over: never said again


def test_a_held_lock_file_is_waited_for_by_name(clock, tmp_path, monkeypatch):
    path = tmp_path / "setup.lock"
    named: list[str] = []
    holder = open(path, "a")  # noqa: SIM115  another process's hold, in this one
    fcntl.flock(holder, fcntl.LOCK_EX)

    @contextlib.contextmanager
    def released_while_waiting(what: str):
        named.append(what)
        with waits.WAITS.waiting(what):
            fcntl.flock(holder, fcntl.LOCK_UN)  # the other process lets go
            yield

    monkeypatch.setattr(locks, "waiting", released_while_waiting)
    with locks.file_lock(path, "the setup lock"):
        pass
    assert named == ["the setup lock, which another process of this machine holds"]
    with locks.file_lock(path, "the setup lock"):  # free: no wait, nothing said
        pass
    assert len(named) == 1
    holder.close()


def test_a_statement_on_a_locked_database_is_said_naming_it(clock, tmp_path, monkeypatch):
    import sqlalchemy as sa

    from ablate.tracking import sql_waits

    clock, said = clock
    monkeypatch.setattr(sql_waits, "WAITS", said)
    sql_waits.watch_sql()
    path = tmp_path / "x.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN EXCLUSIVE")  # another process holds it
    seen: list[list[str]] = []

    def in_the_statement(*_) -> None:  # runs inside the wait the statement opened
        clock.now += 6
        seen.append(said.due())

    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.05})
    sa.event.listen(engine, "before_cursor_execute", in_the_statement)
    try:
        with pytest.raises(sa.exc.OperationalError), engine.connect() as conn:
            conn.execute(sa.text("SELECT * FROM t"))
        holder.execute("COMMIT")
        assert len(seen) == 1 and len(seen[0]) == 1
        assert seen[0][0].startswith(f"still waiting for the database sqlite:///{path}, which")
        clock.now += 60
        assert said.due() == []  # the failed statement's wait was closed
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM t")).scalar() == 0
        assert said.due() == []
    finally:
        engine.dispose()
        holder.close()
