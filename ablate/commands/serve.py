"""`ablate ui` (browse results in the MLflow UI) and its alias `ablate serve`. The UI is the
results store's, a capability a store may have (`ablate.tracking.ui_of`): only MLflow databases
have one; for any other store the command says so in one line.

A taken port is refused before anything starts (its links would open whatever serves there). The
server (`mlflow server`) runs as a child in its own process group (it starts uvicorn and job
workers of its own); SIGTERM, SIGINT or SIGHUP to ablate stops that whole group. So that no
server outlives ablate even when ablate cannot stop it (SIGKILL, a crash), a guard process
watches ablate and stops the group once ablate is gone, and on Linux the server's first
process gets SIGTERM from the kernel when ablate dies (PR_SET_PDEATHSIG)."""

from __future__ import annotations

import typer

UI_HELP = (
    "Browse a results folder in the MLflow UI (http://127.0.0.1:5000 by default).\n\n"
    "Starts `mlflow server` on the folder's database; its URL is also a tracking URI other "
    "machines can log to. Ctrl-C or SIGTERM stops the server and all its processes."
)
SERVE_HELP = "Alias of `ablate ui` (the same MLflow server and options)."
#: Seconds the server group has to exit on SIGTERM before it is killed.
STOP_GRACE_S = 10.0


def register(app: typer.Typer) -> None:
    app.command("ui", help=UI_HELP)(ui)
    app.command("serve", help=SERVE_HELP)(ui)


def ui(
    results: str = typer.Option("results", help="results folder holding mlflow.db"),
    host: str = typer.Option("127.0.0.1", help="bind address (loopback unless told otherwise)"),
    port: int = typer.Option(5000, min=1, max=65535, help="port of the UI and tracking server"),
    tracking_uri: str = typer.Option(
        "", help="an MLflow database URI to serve instead of RESULTS/mlflow.db"
    ),
) -> None:
    from ablate import tracking
    from ablate.base.errors import ConfigError

    store = tracking.open_store(tracking_uri or tracking.default_uri(results))
    browser = tracking.ui_of(store)
    if browser is None:
        raise ConfigError(
            f"ablate ui needs an MLflow database (sqlite or PostgreSQL URI), not {store.uri} "
            f"({store.kind}): ablate report reads any store"
        )
    check_port(host, port)  # before the database is touched: a refusal writes nothing
    store.init()  # a fresh folder gets its (empty) database, as the server would create it
    base = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"
    pages = browser.publish(base)
    log = ui_log(results, port)
    print(f"{browser.name}: starting on {base} (its own log: {log}) ...", flush=True)
    ready = Readiness(
        url=base + getattr(browser, "health_path", "/"),
        on_ready=lambda: print_study_links(browser.name, base, pages),
    )
    # SystemExit, not typer.Exit: cli.main runs Typer without standalone mode
    raise SystemExit(serve_until_signalled(browser.command(host, port), log=log, ready=ready))


def ui_log(results: str, port: int):
    """Where the server's own output goes: `RESULTS/ui-PORT.log` (a temporary folder's when the
    results folder does not exist, e.g. a PostgreSQL store): its INFO lines would flood the
    terminal and bury the links."""
    import tempfile
    from pathlib import Path

    folder = Path(results)
    return (folder if folder.is_dir() else Path(tempfile.gettempdir())) / f"ui-{port}.log"


def print_study_links(name: str, base: str, pages) -> None:
    """Each study's saved view of its runs and the link that opens it on the model-training side
    of the UI (MLflow 3 opens an experiment on its GenAI overview otherwise), printed once the
    server answers: a link printed earlier opens an error page."""
    print(f"{name}: {base}" + ("" if pages else " (no study in this results folder yet)"))
    for page in pages:
        print(f"  {page.study}: {page.url}")
        if page.report_url:
            print(f"  {page.study} report: {page.report_url}")
    if pages:
        print("  (a study page's charts button shows its headline curves per arm)")
    print("Ctrl-C stops the server.", flush=True)


class Readiness:
    """The server's readiness poll: GET `url` until it answers below 500, then `on_ready()`;
    a line every `remind_s` while it starts (the first start on 2 busy cores takes ~40 s)."""

    def __init__(self, url: str, on_ready, remind_s: float = 30.0) -> None:
        self.url, self.on_ready, self.remind_s = url, on_ready, remind_s

    def wait(self, child, stopped) -> None:
        """Poll until the server answers, `child` exits or `stopped()` (a signal came)."""
        import time
        import urllib.error
        import urllib.request

        started = reminded = time.monotonic()
        while child.poll() is None and not stopped():
            try:
                with urllib.request.urlopen(self.url, timeout=2) as response:
                    if response.status < 500:
                        return self.on_ready()
            except urllib.error.HTTPError as exc:
                if exc.code < 500:
                    return self.on_ready()
            except OSError:
                pass
            if time.monotonic() - reminded >= self.remind_s:
                reminded = time.monotonic()
                print(f"still starting ({reminded - started:.0f} s) ...", flush=True)
            time.sleep(0.5)


def check_port(host: str, port: int) -> None:
    """ConfigError unless a server can listen on `host`:`port` now, suggesting a free port."""
    import errno

    from ablate.base.errors import ConfigError

    try:
        _bind(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is taken (its links would open whatever serves there, "
                f"not these results): pass --port {free_port(host, port)}"
            ) from None
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"cannot listen on {host}:{port} ({reason}): pass another --port or --host"
        ) from None


def free_port(host: str, after: int) -> int:
    """The first port above `after` a server can listen on now (else one the system picks)."""
    for port in range(after + 1, min(after + 100, 65536)):
        try:
            _bind(host, port)
        except OSError:
            continue
        return port
    return _bind(host, 0)


def _bind(host: str, port: int) -> int:
    """Bind (as uvicorn does, reusing TIME_WAIT addresses) and release; the port bound."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))
        return probe.getsockname()[1]


#: The guard: waits until its parent (ablate) is gone, then stops the server's process group.
GUARD = """
import os, signal, sys, time
parent, group, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
signal.signal(signal.SIGINT, signal.SIG_IGN)
while os.getppid() == parent:
    time.sleep(0.2)
def send(signum):
    try:
        os.killpg(group, signum)
        return True
    except OSError:
        return False
deadline = time.monotonic() + grace
if send(signal.SIGTERM):
    while time.monotonic() < deadline and send(0):
        time.sleep(0.2)
    send(signal.SIGKILL)
"""


def serve_until_signalled(cmd: list[str], log=None, ready: Readiness | None = None) -> int:
    """Run `cmd` in a new process group until it exits or ablate gets SIGTERM / SIGINT; then
    stop the whole group (SIGTERM, SIGKILL after `STOP_GRACE_S`). Its output goes to `log` (a
    path; else ablate's own); `ready` is polled once it started. Returns the exit status: the
    child's, or 128 + the signal that stopped it."""
    import os
    import signal
    import subprocess
    import sys

    from ablate.base.lifetime import die_with_parent

    out = open(log, "ab") if log is not None else None  # noqa: SIM115 (closed below)
    child = subprocess.Popen(  # SIGTERM from the kernel once ablate dies (Linux)
        cmd,
        env=os.environ.copy(),
        start_new_session=True,
        preexec_fn=die_with_parent,
        stdout=out,
        stderr=out,
    )
    guard = subprocess.Popen(
        [sys.executable, "-c", GUARD, str(os.getpid()), str(child.pid), str(STOP_GRACE_S)],
        stdin=subprocess.DEVNULL,
    )
    received: list[int] = []

    def forward(signum, frame) -> None:
        received.append(signum)
        _signal_group(child.pid, signal.SIGTERM)  # the group's own handlers shut it down

    watched = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # SIGHUP: its terminal closed
    previous = {s: signal.signal(s, forward) for s in watched}
    try:
        if ready is not None:
            ready.wait(child, stopped=lambda: bool(received))
        code = child.wait()
    finally:
        stop_group(child)
        guard.kill()
        guard.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
        if out is not None:
            out.close()
    if code and not received and log is not None:
        print(f"the server exited with status {code}: its log is {log}", file=sys.stderr)
    return 128 + received[0] if received else code


def stop_group(child) -> None:
    """SIGTERM the process group led by `child`, wait up to `STOP_GRACE_S` for it to be gone,
    then SIGKILL what is left."""
    import contextlib
    import signal
    import subprocess
    import time

    _signal_group(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=STOP_GRACE_S)
    while _group_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # uvicorn and job workers finishing after their parent
    _signal_group(child.pid, signal.SIGKILL)
    child.poll()


def _signal_group(pgid: int, signum: int) -> bool:
    """Send `signum` to process group `pgid`; False when no process of it is left."""
    import os

    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (zombies, which only wait to be reaped,
    do not count); without /proc, whether the group can still be signalled."""
    from pathlib import Path

    proc = Path("/proc")
    if not proc.is_dir():
        return _signal_group(pgid, 0)
    for stat in proc.glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # it ended while we looked
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False
