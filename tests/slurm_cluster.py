"""A throwaway single-node Slurm cluster on this machine (Debian's slurm-wlm 22.05 and munge),
for the `slurm` tests: munged, then slurmctld and slurmd on 127.0.0.1, everything of Slurm's in
one temporary folder, no systemd and no cgroups (proctrack/linuxproc, task/none), and the job
completion log (jobcomp/filetxt) as Slurm's own record of every job. Needs root (slurmd runs
the jobs as their users). `python -m tests.slurm_cluster` starts one and prints how to use it.

Measured on this machine kind: ../shared/reference/platform-notes.md, "A single-node Slurm
cluster on this machine"."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("slurm-wlm", "munge")
MUNGE_KEY = Path("/etc/munge/munge.key")


class SlurmUnavailable(RuntimeError):
    """Slurm cannot start here; the message is the one-line reason."""


@dataclass(frozen=True)
class Cluster:
    folder: Path
    conf: Path
    jobcomp: Path

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def install() -> None:
    """apt-get install slurm-wlm munge when a daemon is missing (root only)."""
    if all(shutil.which(t) for t in ("slurmctld", "slurmd", "munged", "sbatch")):
        return
    if os.geteuid() != 0:
        raise SlurmUnavailable("slurm-wlm/munge are not installed and this is not root")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *PACKAGES],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["?"])[-1]
            raise SlurmUnavailable(f"`{' '.join(cmd)}` failed: {last}")


def _munge_works() -> bool:
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=10)
        back = subprocess.run(["unmunge"], input=cred.stdout, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return cred.returncode == 0 and back.returncode == 0


def start_munge() -> int | None:
    """munged as the munge user (its key made when missing); the pid when started here, None
    when one was already answering."""
    if _munge_works():
        return None
    if not MUNGE_KEY.exists():
        MUNGE_KEY.parent.mkdir(mode=0o700, exist_ok=True)
        MUNGE_KEY.write_bytes(os.urandom(1024))
        shutil.chown(MUNGE_KEY, "munge", "munge")
        MUNGE_KEY.chmod(0o400)
    Path("/run/munge").mkdir(exist_ok=True)
    shutil.chown("/run/munge", "munge", "munge")
    subprocess.run(["runuser", "-u", "munge", "--", "/usr/sbin/munged"], check=True, timeout=30)
    for _ in range(50):
        if _munge_works():
            return int(Path("/run/munge/munged.pid").read_text())
        time.sleep(0.2)
    raise SlurmUnavailable("munged started but `munge -n | unmunge` does not work")


def write_conf(folder: Path) -> Cluster:
    host = socket.gethostname().split(".")[0]
    mem_mb = int(int(Path("/proc/meminfo").read_text().split()[1]) / 1024 * 0.8)
    cpus = os.cpu_count() or 1
    jobcomp = folder / "jobcomp.log"
    for sub in ("state", "spool"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    lines = [
        "ClusterName=ablatetest",
        f"SlurmctldHost={host}(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={jobcomp}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "ReturnToService=2",
        "MpiDefault=none",
        # SIGTERM → SIGKILL grace for a trial's clean stop (run KILLED, lease released), which
        # may wait on SQLite's lock beside the other array task: at 10 s a scancel'd run once
        # stayed RUNNING on a loaded machine (1 of 4 runs; cause not pinned down)
        "KillWait=30",
        "MinJobAge=600",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        f"StateSaveLocation={folder / 'state'}",
        f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
        f"SlurmdPidFile={folder / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'slurmd.log'}",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem_mb} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ]
    conf = folder / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return Cluster(folder, conf, jobcomp)


def _wait_idle(cluster: Cluster, timeout: float = 60) -> None:
    env = {**os.environ, **cluster.env()}
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        done = subprocess.run(
            ["sinfo", "--noheader", "-o", "%t"], env=env, capture_output=True, text=True
        )
        state = done.stdout.strip() or done.stderr.strip()
        if state == "idle":
            return
        time.sleep(0.5)
    log = (
        (cluster.folder / "slurmd.log").read_text()[-300:]
        if (cluster.folder / "slurmd.log").exists()
        else ""
    )
    raise SlurmUnavailable(f"the node did not become idle in {timeout:.0f} s ({state}) {log!r}")


def start(folder: Path) -> Cluster:
    """slurmctld then slurmd (both daemonise); returns once the node is idle."""
    if os.geteuid() != 0:
        raise SlurmUnavailable("slurmd must run as root to run jobs, and this is not root")
    cluster = write_conf(folder)
    for daemon in ("slurmctld", "slurmd"):
        done = subprocess.run(
            [f"/usr/sbin/{daemon}", "-f", str(cluster.conf)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise SlurmUnavailable(f"{daemon} did not start: {done.stderr.strip()[-300:]}")
    _wait_idle(cluster)
    return cluster


def stop(cluster: Cluster) -> None:
    """End slurmd and slurmctld by the pids in their pid files (their jobs end with slurmd)."""
    for name in ("slurmd", "slurmctld"):
        pid_file = cluster.folder / f"{name}.pid"
        with contextlib.suppress(OSError, ValueError):
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def single_node_cluster() -> Iterator[Cluster]:
    install()
    munged = start_munge()
    folder = Path(tempfile.mkdtemp(prefix="ablate-slurm-"))
    cluster = None
    try:
        cluster = start(folder)
        yield cluster
    finally:
        if cluster is not None:
            stop(cluster)
        if munged is not None:
            with contextlib.suppress(OSError):
                os.kill(munged, signal.SIGTERM)
        shutil.rmtree(folder, ignore_errors=True)


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":  # a cluster for trying things by hand; Ctrl-C or SIGTERM stops it
    signal.signal(signal.SIGTERM, _interrupt)
    with single_node_cluster() as c:
        print(f"export SLURM_CONF={c.conf}   # job completion log: {c.jobcomp}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
