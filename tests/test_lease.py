"""Trial leases: one holder at a time, compare-and-set takeover of expired or dead holders,
renewal by heartbeat, and fencing (a holder that cannot renew stops writing first)."""

from __future__ import annotations

import socket
import subprocess
import threading
import time

import pytest

from ablate.base.locks import file_lock
from ablate.base.store.leases import LeaseTable
from ablate.study.lease import LeaseLost, TrialLease, owner_is_dead
from ablate.tracking import leases_of, open_store
from ablate.tracking.sql_leases import LeaseStore


@pytest.fixture
def store(tmp_path) -> LeaseStore:
    return LeaseStore(f"sqlite:///{tmp_path / 'leases.db'}")


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


def test_an_expired_lease_is_taken_over_a_live_one_is_not(store):
    assert store.acquire("k", foreign(), ttl=0.05) is None
    assert store.acquire("k", "me") == foreign()  # within its ttl: a live remote runner
    time.sleep(0.1)
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


def test_heartbeat_keeps_the_lease_beyond_its_ttl(store):
    lease = TrialLease(store, "k", ttl=0.3)
    assert lease.acquire() is None
    time.sleep(0.6)
    lease.check()  # renewed meanwhile
    assert store.acquire("k", "other") == lease.owner
    lease.release()
    assert store.holder("k") is None


def test_a_holder_that_cannot_renew_stops_before_anyone_may_take_over(store, monkeypatch):
    lease = TrialLease(store, "k", ttl=2.0)
    assert lease.acquire() is None

    def unreachable(*args, **kwargs):
        raise OSError("database down")

    monkeypatch.setattr(store, "renew", unreachable)
    time.sleep(1.6)  # past TTL * SAFE (1.5 s) since the last renewal, before the TTL itself
    with pytest.raises(LeaseLost):
        lease.check()
    assert store.acquire("k", "other") == lease.owner  # not yet expired for others
    lease.release()


def test_a_holder_whose_lease_was_taken_knows_it(store):
    lease = TrialLease(store, "k", ttl=0.3)
    assert lease.acquire() is None
    holder, expires = store.holder("k")
    assert store._swap("k", (holder, expires), "thief", time.time() + 60)
    time.sleep(0.15)  # one heartbeat
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
    order = []

    def hold() -> None:
        with file_lock(tmp_path / "x.lock"):
            order.append("second")

    with file_lock(tmp_path / "x.lock"):
        t = threading.Thread(target=hold)
        t.start()
        time.sleep(0.1)
        order.append("first")
    t.join()
    assert order == ["first", "second"]
