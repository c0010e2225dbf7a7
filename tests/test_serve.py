"""`ablate ui` / `ablate serve`: SIGTERM stops the server's whole process group, port included."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: Like `mlflow server`: a parent that ignores nothing and forwards nothing, and a grandchild
#: (uvicorn) holding the port.
FAKE_SERVER = """
import subprocess, sys
holder = (
    "import socket, sys, time; s = socket.socket(); "
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(600)"
)
subprocess.Popen([sys.executable, "-c", holder, sys.argv[1]]).wait()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_then_sigterm(cmd: list[str], port: int, wait_s: float) -> tuple[int, set[int]]:
    """Start `cmd`, wait until `port` listens, SIGTERM it; (its exit code, its descendants)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + wait_s
    while time.time() < deadline and proc.poll() is None and not _listening(port):
        time.sleep(0.2)
    assert _listening(port), "the server never listened"
    children = _descendants(proc.pid)
    assert children, "the server runs in child processes"
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=60), children


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_sigterm_stops_the_server_group_and_frees_its_port():
    port = _free_port()
    call = "import sys; from ablate.commands.serve import serve_until_signalled as s; "
    call += "sys.exit(s(sys.argv[1:]))"
    cmd = [sys.executable, "-c", call, sys.executable, "-c", FAKE_SERVER, str(port)]
    code, children = _start_then_sigterm(cmd, port, wait_s=30)
    assert code == 128 + signal.SIGTERM
    assert not _listening(port)
    assert not [pid for pid in children if _alive(pid)]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_ablate_ui_stops_mlflow_and_uvicorn_on_sigterm(tmp_path):
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "ablate.cli",
        "ui",
        "--results",
        str(tmp_path),
        "--port",
        str(port),
    ]
    code, children = _start_then_sigterm(cmd, port, wait_s=180)  # ~40 s on 2 busy cores
    assert code == 128 + signal.SIGTERM
    assert len(children) >= 2  # mlflow server and uvicorn (and its job runners)
    assert not _listening(port)
    assert not [pid for pid in children if _alive(pid)]
