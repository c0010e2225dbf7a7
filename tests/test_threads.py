"""The torch thread count: an explicit request wins, else never more threads than free cores."""

from __future__ import annotations

import pytest

from ablate.base import threads

STAT = "cpu  {total}\ncpu0 {cpu0}\ncpu1 {cpu1}\ncpu2 {cpu2}\nintr 1 2 3\n"


def _stat(cpu0: tuple, cpu1: tuple, cpu2: tuple = (0, 0, 0, 0, 0, 0, 0, 0)) -> str:
    fmt = " ".join
    return STAT.format(
        total="0 0 0 0 0 0 0 0",
        cpu0=fmt(map(str, cpu0)),
        cpu1=fmt(map(str, cpu1)),
        cpu2=fmt(map(str, cpu2)),
    )


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """A 4-core machine, nothing else running, no cgroup limit, no OMP_NUM_THREADS."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(threads.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(threads, "_sampled_busy", lambda seconds=0.2: 0)
    monkeypatch.setattr(threads, "_CPU_MAX", tmp_path / "no-cpu.max")
    return monkeypatch


def test_idle_machine_gives_each_worker_its_share(machine):
    assert threads.choose_threads() == 4
    assert threads.choose_threads(2) == 2
    assert threads.choose_threads(3) == 1
    assert threads.choose_threads(8) == 1


@pytest.mark.parametrize(("load", "expected"), [(0.9, 4), (1.7, 3), (3.2, 1), (12.0, 1)])
def test_busy_cores_by_load_average_are_left_alone(machine, load, expected):
    machine.setattr(threads.os, "getloadavg", lambda: (load, 0.0, 0.0))
    assert threads.choose_threads() == expected


def test_a_process_just_started_is_seen_by_the_sample_before_the_load_average(machine):
    machine.setattr(threads, "_sampled_busy", lambda seconds=0.2: 2)
    assert threads.choose_threads() == 2
    assert threads.choose_threads(4) == 1


def test_explicit_requests_win(machine):
    machine.setattr(threads.os, "getloadavg", lambda: (12.0, 0.0, 0.0))
    assert threads.choose_threads(requested=3) == 3
    machine.setenv("OMP_NUM_THREADS", "2")
    assert threads.choose_threads() == 2
    machine.setenv("OMP_NUM_THREADS", "not-a-number")
    assert threads.choose_threads() == 1  # ignored: the rule, with every core busy


def test_cgroup_quota_caps_the_cores(machine, tmp_path):
    limit = tmp_path / "cpu.max"
    machine.setattr(threads, "_CPU_MAX", limit)
    limit.write_text("150000 100000\n")
    assert threads.available_cores() == 2
    limit.write_text("max 100000\n")
    assert threads.available_cores() == 4


def test_load_average_of_a_bigger_machine_is_scaled_to_our_cores(machine):
    machine.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    machine.setattr(threads.os, "cpu_count", lambda: 16)
    machine.setattr(threads.os, "getloadavg", lambda: (8.0, 0.0, 0.0))  # half the machine
    assert threads.busy_cores(2) == 1


def test_sample_counts_busy_cores_among_ours_only(monkeypatch, tmp_path):
    stat = tmp_path / "stat"
    idle = (0, 0, 0, 100, 0, 0, 0, 0)
    stat.write_text(_stat(idle, idle, idle))
    after = _stat(
        (95, 0, 5, 100, 0, 0, 0, 0),  # cpu0: busy the whole interval
        (0, 0, 1, 199, 0, 0, 0, 0),  # cpu1: idle
        (100, 0, 0, 100, 0, 0, 0, 0),  # cpu2: busy, but not ours
    )
    monkeypatch.setattr(threads, "_PROC_STAT", stat)
    monkeypatch.setattr(threads.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(threads.time, "sleep", lambda s: stat.write_text(after))
    assert threads._sampled_busy() == 1


def test_apply_threads_sets_torch(monkeypatch):
    import torch

    before = torch.get_num_threads()
    try:
        assert threads.apply_threads(requested=1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert threads.apply_threads() == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
