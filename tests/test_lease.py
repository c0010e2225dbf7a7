"""Trial leases: one holder at a time, compare-and-set takeover of expired or dead holders,
renewal by heartbeat, and fencing (a holder that cannot renew stops writing first)."""

from __future__ import annotations

import fcntl
import socket
import subprocess
import threading

import pytest

from ablate.base.locks import file_lock
from ablate.base.store.leases import LeaseTable
from ablate.study.lease import SAFE, LeaseLost, TrialLease, owner_is_dead
from ablate.testing import ManualClock
from ablate.tracking import leases_of, open_store
from ablate.tracking.sql_leases import LeaseStore


@pytest.fixture
def clock() -> ManualClock:
    """One clock for the table and the holder: time passes only when a test says so."""
    return ManualClock()


@pytest.fixture
def store(tmp_path, clock) -> LeaseStore:
    return LeaseStore(f"sqlite:///{tmp_path / 'leases.db'}", clock=clock)


def held_lease(store, clock, ttl: float) -> TrialLease:
    lease = TrialLease(store, "k", ttl=ttl, clock=clock, heartbeat=False)
    assert lease.acquire() is None
    return lease


def foreign(pid: int = 1) -> str:
    return f"another-host-{socket.gethostname()}:{pid}:abcd"


def dead_local_owner() -> str:
    proc = subprocess.Popen(["sleep", "30"])
    proc.kill()
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:abcd"


def test_one_holder_until_released(store):
    assert store.acquire("s/t", "a") is None
    assert store.acquire("s/t", "b") == "a"
    assert store.acquire("s/t", "a") is None  # re-entrant for its owner
    store.release("s/t", "b")  # not b's: no effect
    assert store.acquire("s/t", "b") == "a"
    store.release("s/t", "a")
    assert store.acquire("s/t", "b") is None


def test_an_expired_lease_is_taken_over_a_live_one_is_not(store, clock):
    assert store.acquire("k", foreign(), ttl=10) is None
    clock.advance(10)
    assert store.acquire("k", "me") == foreign()  # within its ttl: a live remote runner
    clock.advance(0.01)
    assert store.acquire("k", "me") is None
    assert not store.renew("k", foreign())  # the old holder learns it lost the lease


def test_a_dead_process_of_this_machine_is_taken_over_at_once(store):
    dead = dead_local_owner()
    assert owner_is_dead(dead) and not owner_is_dead(foreign())
    assert store.acquire("k", dead, ttl=3600) is None
    assert store.acquire("k", "me") is None


def test_racing_runners_get_exactly_one_lease(tmp_path):
    url = f"sqlite:///{tmp_path / 'race.db'}"
    won, barrier = [], threading.Barrier(8)

    def runner(i: int) -> None:
        store = LeaseStore(url)
        barrier.wait()
        if store.acquire("k", f"{foreign(i)}") is None:
            won.append(i)

    threads = [threading.Thread(target=runner, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1


def test_heartbeat_keeps_the_lease_beyond_its_ttl(store, clock):
    lease = held_lease(store, clock, ttl=6.0)
    for _ in range(4):  # 4 beats one interval (ttl / 6) apart: twice the ttl has passed
        clock.advance(3.0)
        assert lease.beat()
    lease.check()
    assert store.acquire("k", "other") == lease.owner
    lease.release()
    assert store.holder("k") is None


def test_without_a_beat_the_holder_stops_at_its_safe_margin(store, clock):
    lease = held_lease(store, clock, ttl=6.0)
    clock.advance(6.0 * SAFE)
    lease.check()  # exactly at the margin: still valid
    clock.advance(0.01)
    with pytest.raises(LeaseLost):
        lease.check()


def test_the_heartbeat_thread_renews(tmp_path):
    renewed = threading.Event()

    class Watched(LeaseStore):
        def renew(self, *args, **kwargs):
            done = super().renew(*args, **kwargs)
            renewed.set()
            return done

    lease = TrialLease(Watched(f"sqlite:///{tmp_path / 'l.db'}"), "k", ttl=0.6)
    assert lease.acquire() is None
    assert renewed.wait(timeout=60)  # the thread's first beat, ttl / 6 after acquire
    lease.release()
    assert lease._thread is not None and not lease._thread.is_alive()


def test_a_holder_that_cannot_renew_stops_before_anyone_may_take_over(store, clock, monkeypatch):
    lease = held_lease(store, clock, ttl=2.0)

    def unreachable(*args, **kwargs):
        raise OSError("database down")

    monkeypatch.setattr(store, "renew", unreachable)
    clock.advance(1.0)
    assert lease.beat()  # not lost, only not renewed
    clock.advance(0.6)  # past TTL * SAFE (1.5 s) since the last renewal, before the TTL itself
    with pytest.raises(LeaseLost):
        lease.check()
    assert store.acquire("k", "other") == lease.owner  # not yet expired for others
    lease.release()


def test_a_holder_whose_lease_was_taken_knows_it(store, clock):
    lease = held_lease(store, clock, ttl=0.3)
    holder, expires = store.holder("k")
    assert store._swap("k", (holder, expires), "thief", clock() + 60)
    assert not lease.beat()
    with pytest.raises(LeaseLost):
        lease.check()
    lease.release()
    assert store.holder("k")[0] == "thief"  # releasing does not touch the new holder's lease


def lease_url(tracking_uri: str, results_root) -> str:
    leases = leases_of(open_store(tracking_uri), results_root)
    assert isinstance(leases, LeaseTable)
    return leases.url


def test_lease_database_follows_the_results_store(tmp_path):
    assert lease_url(f"sqlite:///{tmp_path}/db/mlflow.db", tmp_path / "r") == (
        f"sqlite:///{tmp_path}/db/leases.db"
    )
    assert lease_url("postgresql://u@h/mlflow", tmp_path).startswith("postgresql+psycopg2://u@h")
    assert lease_url("http://127.0.0.1:5000", tmp_path / "r") == (
        f"sqlite:///{(tmp_path / 'r').resolve()}/leases.db"
    )
    assert lease_url(f"jsonl://{tmp_path}/store", tmp_path / "r") == (
        f"sqlite:///{tmp_path}/store/leases.db"  # in the file store's own folder
    )


def test_file_lock_is_exclusive(tmp_path):
    def free() -> bool:  # another open file description asks without waiting
        with open(tmp_path / "x.lock", "a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(other, fcntl.LOCK_UN)
            return True

    with file_lock(tmp_path / "x.lock"):
        assert not free()
    assert free()
