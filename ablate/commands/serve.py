"""`ablate ui` (browse results in the MLflow UI) and its alias `ablate serve`. The UI is the
results store's (`StudyStore.ui`): only MLflow databases have one.

The server (`mlflow server`) runs as a child in its own process group (it starts uvicorn and job
workers of its own); SIGTERM or SIGINT to ablate stops that whole group, so no server outlives
ablate or keeps the port."""

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
    port: int = typer.Option(5000, help="port of the UI and tracking server"),
    tracking_uri: str = typer.Option(
        "", help="an MLflow database URI to serve instead of RESULTS/mlflow.db"
    ),
) -> None:
    from ablate import tracking
    from ablate.errors import ConfigError

    store = tracking.open_store(tracking_uri or tracking.default_uri(results))
    browser = store.ui()
    if browser is None:
        raise ConfigError(
            f"ablate ui needs an MLflow database (sqlite or PostgreSQL URI), not {store.uri} "
            f"({store.kind}): ablate report reads any store"
        )
    store.init()  # a fresh folder gets its (empty) database, as the server would create it
    print_study_links(browser, host, port)
    # SystemExit, not typer.Exit: cli.main runs Typer without standalone mode
    raise SystemExit(serve_until_signalled(browser.command(host, port)))


def print_study_links(browser, host: str, port: int) -> None:
    """Write each study's saved view of its runs (grouped by arm, headline metrics and the
    differing Algorithm fields as columns) and print the link that opens it on the model-training
    side of the UI (MLflow 3 opens an experiment on its GenAI overview otherwise)."""
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    base = f"http://{shown}:{port}"
    pages = browser.publish(base)
    print(f"{browser.name}: {base}" + ("" if pages else " (no study in this results folder yet)"))
    for page in pages:
        print(f"  {page.study}: {page.url}")
        if page.report_url:
            print(f"  {page.study} report: {page.report_url}")
    if pages:
        print("  (a study page's charts button shows its headline curves per arm)", flush=True)


def serve_until_signalled(cmd: list[str]) -> int:
    """Run `cmd` in a new process group until it exits or ablate gets SIGTERM / SIGINT; then
    stop the whole group (SIGTERM, SIGKILL after `STOP_GRACE_S`). Returns the exit status:
    the child's, or 128 + the signal that stopped it."""
    import os
    import signal
    import subprocess

    child = subprocess.Popen(cmd, env=os.environ.copy(), start_new_session=True)
    received: list[int] = []

    def forward(signum, frame) -> None:
        received.append(signum)
        _signal_group(child.pid, signal.SIGTERM)  # the group's own handlers shut it down

    watched = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, forward) for s in watched}
    try:
        code = child.wait()
    finally:
        stop_group(child)
        for s, handler in previous.items():
            signal.signal(s, handler)
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
