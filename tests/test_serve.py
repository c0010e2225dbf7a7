"""`ablate ui` / `ablate serve`: SIGTERM stops the server's whole process group, port included."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

#: Like `mlflow server`: a parent that ignores nothing and forwards nothing, and a grandchild
#: (uvicorn) holding the port, which says "listening" once it does.
FAKE_SERVER = """
import subprocess, sys
holder = (
    "import socket, sys, time; s = socket.socket(); "
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); print('listening', flush=True); "
    "time.sleep(600)"
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


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    """Block until every process in `pids` has exited (the kernel tells, through a pidfd each:
    no polling), at most `timeout` seconds; those still running."""
    left = set()
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # gone already
        try:
            if not select.select([fd], [], [], timeout)[0]:
                left.add(pid)
        finally:
            os.close(fd)
    return left


def _ready(proc: subprocess.Popen, line: str) -> None:
    """Read `proc`'s output until `line` starts a line (the server says it is ready)."""
    for got in proc.stdout:
        if got.startswith(line):
            return
    raise AssertionError(f"ended (rc {proc.wait()}) without saying {line!r}")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start_then_sigterm(cmd: list[str], port: int, ready: str) -> tuple[int, set[int]]:
    """Start `cmd`, wait until it prints `ready`, SIGTERM it; (its exit code, its descendants)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL, "text": True}
    proc = subprocess.Popen(cmd, env=env, **pipe)
    _ready(proc, ready)
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
    code, children = _start_then_sigterm(cmd, port, ready="listening")
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
        "ablate.commands.cli",
        "ui",
        "--results",
        str(tmp_path),
        "--port",
        str(port),
    ]
    code, children = _start_then_sigterm(cmd, port, ready="Ctrl-C stops the server")
    assert code == 128 + signal.SIGTERM
    assert len(children) >= 2  # mlflow server and uvicorn (and its job runners)
    assert not _listening(port)
    assert not [pid for pid in children if _alive(pid)]


def _start_then_signal(signum: int, port: int) -> tuple[subprocess.Popen, set[int]]:
    """The fake server under `serve_until_signalled`, listening; then `signum` to ablate."""
    call = "import sys; from ablate.commands.serve import serve_until_signalled as s; "
    call += "sys.exit(s(sys.argv[1:]))"
    cmd = [sys.executable, "-c", call, sys.executable, "-c", FAKE_SERVER, str(port)]
    pipe = {"stdout": subprocess.PIPE, "stderr": subprocess.DEVNULL, "text": True}
    proc = subprocess.Popen(cmd, **pipe)
    _ready(proc, "listening")
    assert _listening(port), "the server never listened"
    children = _descendants(proc.pid)
    proc.send_signal(signum)
    return proc, children


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGHUP], ids=["SIGKILL", "SIGHUP"])
def test_the_server_never_outlives_ablate_whatever_signal_ends_it(signum):
    port = _free_port()
    proc, children = _start_then_signal(signum, port)
    code = proc.wait(timeout=30)
    assert code == (-signal.SIGKILL if signum == signal.SIGKILL else 128 + signal.SIGHUP)
    # after SIGKILL the guard notices within 0.2 s and stops the group
    assert _wait_gone(children, timeout=30) == set()
    assert not _listening(port)


def test_a_taken_port_is_one_line_suggesting_a_free_one_and_writes_nothing(tmp_path, capsys):
    from ablate.commands.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["ui", "--results", str(tmp_path / "results"), "--port", str(port)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"error: port {port} on 127.0.0.1 is taken") and "\n" not in err
        suggested = int(err.rpartition("pass --port ")[2])
        assert suggested != port
        with socket.socket() as free:  # the suggestion can be listened on
            free.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            free.bind(("127.0.0.1", suggested))
    assert not (tmp_path / "results").exists()


#: Like `mlflow server` starting up: INFO lines first, then (a moment later) an HTTP server
#: whose /health answers 200.
SLOW_HTTP_SERVER = """
import http.server, sys, time
for i in range(50):
    print(f"INFO mlflow.server: starting worker {i}", flush=True)
time.sleep(1.0)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
        self.wfile.write(b"OK")
    def log_message(self, *args):
        print("INFO request", *args, file=sys.stderr, flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""

#: The readiness callback: checks the server answers at that moment, says so, then stops ablate.
ON_READY = """
import os, signal, sys, urllib.request
from ablate.commands.serve import Readiness, serve_until_signalled
port, log = sys.argv[1], sys.argv[2]
url = f"http://127.0.0.1:{port}/health"
def ready():
    with urllib.request.urlopen(url, timeout=5) as response:
        print(f"LINKS after the server answered {response.status}", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
code = serve_until_signalled(sys.argv[3:], log=log, ready=Readiness(url, ready, remind_s=0.0))
sys.exit(code)
"""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_links_come_once_the_server_answers_and_its_own_output_goes_to_a_log(tmp_path):
    port, log = _free_port(), tmp_path / "ui.log"
    cmd = [sys.executable, "-c", ON_READY, str(port), str(log)]
    cmd += [sys.executable, "-c", SLOW_HTTP_SERVER, str(port)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "LINKS after the server answered 200"
    assert any(line.startswith("still starting") for line in lines[:-1])  # said while it starts
    assert "INFO" not in done.stdout + done.stderr  # the server's lines went to its log
    assert log.read_text().count("INFO mlflow.server: starting worker") == 50
    assert not _listening(port)


def test_a_server_that_exits_before_answering_names_its_log(tmp_path, capsys):
    from ablate.commands.serve import Readiness, serve_until_signalled

    log, called = tmp_path / "ui.log", []
    crash = [sys.executable, "-c", "import sys; print('Error: no such database'); sys.exit(3)"]
    url = f"http://127.0.0.1:{_free_port()}/health"
    assert (
        serve_until_signalled(crash, log=log, ready=Readiness(url, lambda: called.append(1))) == 3
    )
    assert called == [] and "no such database" in log.read_text()
    assert f"the server exited with status 3: its log is {log}" in capsys.readouterr().err
