"""Shared fixtures."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import pytest


def _pg_bin() -> Path | None:
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent  # /usr/local/bin may hold only a few links
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return versions[-1].parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL server on loopback with databases `optuna` and `mlflow`; as root,
    the server runs as the `postgres` OS user (PostgreSQL refuses to run as root)."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl) not installed")
    as_user: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="ablate-pg-"))  # short: unix socket paths are limited
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no `postgres` OS user to run the server")
        os.chown(root, owner.pw_uid, owner.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port, data = _free_port(), root / "data"

    def pg(tool: str, *args: str) -> None:
        subprocess.run([*as_user, str(bindir / tool), *args], check=True, capture_output=True)

    pg("initdb", "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync")
    options = f"-k {root} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off"
    try:
        pg("pg_ctl", "-D", str(data), "-l", str(root / "log"), "-w", "-o", options, "start")
        for db in ("optuna", "mlflow"):
            pg("createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", db)
        yield {
            name: f"postgresql://postgres@127.0.0.1:{port}/{name}" for name in ("optuna", "mlflow")
        }
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm_cluster():
    """A single-node Slurm cluster (tests/slurm_cluster.py), Debian's packages installed when
    missing; skipped with the reason when it cannot start here."""
    from tests.slurm_cluster import SlurmUnavailable, single_node_cluster

    try:
        context = single_node_cluster()
        cluster = context.__enter__()
    except SlurmUnavailable as exc:
        pytest.skip(f"no Slurm here: {exc}")
    try:
        yield cluster
    finally:
        context.__exit__(None, None, None)
