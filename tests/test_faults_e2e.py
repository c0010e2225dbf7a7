"""Fault injection, end to end (slow): real processes killed with SIGKILL at named points, a
worker dying on a real PostgreSQL server while others take its trial over, an MLflow tracking
server stopped and restarted mid-study, and two `ablate run` processes racing on one results
folder. Every test ends with the exactly-once ledger: each trial FINISHED exactly once (one MLflow
run), each (metric, step) logged exactly once, and no step missing. The fast fault tests are in
test_faults.py."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from ablate import tracking
from ablate.base.sql_urls import driver_url
from ablate.stages.checkpoint import checkpoint_dirs
from ablate.study import load_study
from ablate.study.distributed import TRIAL_ATTR
from ablate.study.identity import identified_trials
from ablate.testing import exactly_once_problems, study_ledger, zoo_model_built
from ablate.tracking.sql_leases import TABLE

pytestmark = [
    pytest.mark.skipif(not zoo_model_built("hopeless"), reason="zoo model 'hopeless' not built"),
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning"),
]

STEPS = 6
EVAL_STEPS = (0, 3, 6)  # at the start, every 3 steps, at the end
STUDY = """
from ablate.study import Budget, EvalSpec, Study, arm

STUDY = Study(
    name={name!r},
    base_models=[{model!r}],
    arms=[arm("grpo", "grpo", kl_coef=0.0), arm("dr_grpo", "dr_grpo")],
    seeds={seeds!r},
    budget=Budget(max_steps={steps}, prompts_per_step=2, group_size=2, max_new_tokens={tokens}),
    eval=EvalSpec(every=3, max_problems=2, n_samples=2, ks=(1,)),
    passk=None,
    checkpoint_every=2,
)
"""


# --- helpers ------------------------------------------------------------------------------------


def write_study(
    folder: Path,
    name: str,
    seeds: tuple[int, ...] = (0,),
    model: str = "hopeless",
    tokens: int = 12,
) -> Path:
    path = folder / f"{name}.py"
    text = STUDY.format(name=name, model=model, seeds=list(seeds), steps=STEPS, tokens=tokens)
    path.write_text(textwrap.dedent(text))
    return path


def trial_ids(study_file: Path) -> list[str]:
    return [t.id for t in identified_trials(load_study(study_file))]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ABLATE_FAULT"}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.update(extra)
    return env


def ablate_run(study_file: Path, results: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ablate.commands.cli",
        "run",
        str(study_file),
        "--results",
        str(results),
        "--out",
        str(results.parent / f"{results.name}-reports"),
        *extra,
    ]


def start(cmd: list[str], log: Path, **env: str) -> subprocess.Popen:
    """A child in its own process group (so `stop` ends its children too), output to `log`."""
    with open(log, "w") as out:
        return subprocess.Popen(
            cmd,
            cwd=log.parent,
            env=child_env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def stop(proc: subprocess.Popen | None, sig: int = signal.SIGKILL) -> None:
    """End `proc` and whatever is left of its process group."""
    if proc is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
    proc.wait(timeout=60)


def run_to_end(cmd: list[str], log: Path, timeout: float = 300, **env: str) -> tuple[int, str]:
    proc = start(cmd, log, **env)
    try:
        proc.wait(timeout=timeout)
    finally:
        stop(proc)
    return proc.returncode, log.read_text()


def ledger_problems(uri: str, study_file: Path) -> list[str]:
    """Every way the study's MLflow store breaks exactly-once (see `exactly_once_problems`),
    for the per-step reward and the eval metric."""
    ledger = study_ledger(uri, load_study(study_file).name)
    ids = trial_ids(study_file)
    problems = exactly_once_problems(ledger, ids, range(1, STEPS + 1), "reward/mean")
    problems += exactly_once_problems(ledger, ids, EVAL_STEPS, "eval/pass_at_1")
    return list(dict.fromkeys(problems))


def resumes(uri: str, study_name: str) -> dict[str, str]:
    """trial id -> its run's `ablate.resumes` tag ("0" when never resumed)."""
    runs = tracking.open_store(uri).runs(study_name).runs
    return {t: str(v) for t, v in zip(runs["trial_id"], runs["resumes"], strict=True)}


def lease_url(uri: str, results: Path) -> str:
    return tracking.leases_of(tracking.open_store(uri), results).url


def leases_left(url: str) -> list[tuple[str, str]]:
    """(trial key, owner) of every lease still in the lease table at `url`: none once every
    runner is done, the dead ones' included (taken over, then released)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(f"SELECT lease_key, owner FROM {TABLE}"))
            return [tuple(r) for r in rows]
    finally:
        engine.dispose()


def trial_dir(results: Path, study_name: str, trial_id: str) -> Path:
    return results / study_name / "trials" / trial_id


def checkpoint_steps(run_dir: Path) -> list[int]:
    return [int(p.name[len("step-") :]) for p in checkpoint_dirs(run_dir)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(text: str, n: int = 3000) -> str:
    return text[-n:]


# --- kill -9 at each fault point, rerun, bit-identical to a run never killed --------------------

KILL_STUDY = "killmatrix"
#: fault -> (complete checkpoints of the killed trial, reward/mean steps in MLflow) at the kill
AFTER_KILL = {
    "step_logged@1": ([], []),  # before the first checkpoint and the first flush
    "metrics_flushed@4": ([2], [1, 2, 3, 4]),
    "checkpoint_files_written@4": ([2], [1, 2, 3, 4]),  # step-000004 only as a temporary folder
    "checkpoint_renamed@2": ([2], [1, 2]),
    "step_logged@5": ([4, 2], [1, 2, 3, 4]),  # step 5 buffered, never sent
    "final_eval@6": ([6, 4], [1, 2, 3, 4, 5, 6]),
}
#: Per-step metrics that measure time or speed, not the training itself.
TIMING = re.compile(r"seconds|perf/|wall|per_s|throughput|time")


@pytest.fixture(scope="module")
def kill_study(tmp_path_factory) -> Path:
    """`rl_ready` (half its samples right; its answers need ~30-45 tokens): rewards vary, so
    the weights and the optimizer change and a resume that restored them wrongly would show in
    the curves (with `hopeless` every reward is 0 and nothing is ever updated)."""
    if not zoo_model_built("rl_ready"):
        pytest.skip("zoo model 'rl_ready' not built")
    folder = tmp_path_factory.mktemp("killmatrix")
    return write_study(folder, KILL_STUDY, model="rl_ready", tokens=48)


def curves(uri: str, study_name: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """trial id -> metric -> [(step, value)] for every metric that is not a timing."""
    store = tracking.open_store(uri)
    table = store.runs(study_name)
    keys = [k for k in table.metrics.columns if not TIMING.search(k)]
    out: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for trial_id, run_id in zip(table.runs["trial_id"], table.runs["run_id"], strict=True):
        out[trial_id] = {k: store.metric_history(run_id, k) for k in keys}
    return out


@pytest.fixture(scope="module")
def reference_curves(kill_study, tmp_path_factory):
    """The study run once by `ablate run`, never killed."""
    results = tmp_path_factory.mktemp("reference") / "results"
    code, log = run_to_end(ablate_run(kill_study, results), results.parent / "run.log")
    assert code == 0, tail(log)
    return curves(tracking.default_uri(results), KILL_STUDY)


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(AFTER_KILL))
def test_kill_at_fault_point_then_rerun_is_exactly_once_and_bit_identical(
    fault, kill_study, reference_curves, tmp_path
):
    results = tmp_path / "results"
    uri = tracking.default_uri(results)
    first, second = trial_ids(kill_study)

    code, log = run_to_end(
        ablate_run(kill_study, results), tmp_path / "killed.log", ABLATE_FAULT=fault
    )

    assert code == -signal.SIGKILL, f"{fault}: the run should have killed itself\n{tail(log)}"
    runs = tracking.open_store(uri).runs(KILL_STUDY).runs
    # it died in the first trial, whose run it left RUNNING
    assert list(zip(runs["trial_id"], runs["status"], strict=True)) == [(first, "RUNNING")]
    ckpts, logged = AFTER_KILL[fault]
    killed_dir = trial_dir(results, KILL_STUDY, first)
    assert checkpoint_steps(killed_dir) == ckpts
    curve = tracking.open_store(uri).metric_history(runs["run_id"][0], "reward/mean")
    steps = [s for s, _ in curve]
    assert steps == logged, f"{fault}: metrics in MLflow at the kill"
    if fault.startswith("checkpoint_files_written"):  # the half-written one never counts
        assert list((killed_dir / "checkpoints").glob("step-000004.tmp-*"))
    held = leases_left(lease_url(uri, results))
    assert [key for key, _ in held] == [f"{KILL_STUDY}/{first}"]  # by the dead process

    code, log = run_to_end(ablate_run(kill_study, results), tmp_path / "rerun.log")

    assert code == 0, tail(log)
    assert ledger_problems(uri, kill_study) == []
    assert resumes(uri, KILL_STUDY) == {first: "1", second: "0"}
    assert leases_left(lease_url(uri, results)) == []  # the dead runner's lease taken over
    got = curves(uri, KILL_STUDY)
    assert any(v for _, v in reference_curves[first]["reward/mean"])  # a curve worth comparing
    assert got[first]["reward/mean"] == reference_curves[first]["reward/mean"]
    for trial_id in (first, second):  # every other per-step metric too, bit for bit
        assert got[trial_id] == reference_curves[trial_id], f"{fault}: {trial_id}"


# --- two `ablate run` processes on one fresh results folder -------------------------------------


def watch_leases(db: Path, procs: list[subprocess.Popen], timeout: float) -> list[tuple]:
    """(wall time, lease key, owner) of every lease seen in the table, polled until every
    process has exited."""
    seen: list[tuple[float, str, str]] = []
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        with contextlib.suppress(sqlite3.Error):
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.5)
            try:
                now = time.time()
                seen += [
                    (now, k, o) for k, o in conn.execute(f"SELECT lease_key, owner FROM {TABLE}")
                ]
            finally:
                conn.close()
        time.sleep(0.02)
    return seen


@pytest.mark.slow
def test_two_runs_started_together_train_each_trial_once(tmp_path):
    study_file = write_study(tmp_path, "twin", seeds=(0, 1, 2))  # 6 trials
    results = tmp_path / "results"
    ids = trial_ids(study_file)
    procs = [start(ablate_run(study_file, results), tmp_path / f"run{i}.log") for i in range(2)]
    try:
        seen = watch_leases(results / "leases.db", procs, timeout=400)
        for p in procs:
            p.wait(timeout=30)
    finally:
        for p in procs:
            stop(p)
    logs = [(tmp_path / f"run{i}.log").read_text() for i in range(2)]

    assert [p.returncode for p in procs] == [0, 0], "\n---\n".join(tail(x) for x in logs)
    uri = tracking.default_uri(results)
    assert ledger_problems(uri, study_file) == []
    assert resumes(uri, "twin") == dict.fromkeys(ids, "0")  # no trial was started twice
    assert leases_left(lease_url(uri, results)) == []
    # Who trained each trial: the lease holders seen while its run was open (a runner that
    # takes a lease after the run closed only finds the trial FINISHED and lets go).
    runs = tracking.open_store(uri).runs("twin").runs.set_index("trial_id")
    pids = {str(p.pid) for p in procs}
    trainers = {
        t: {
            owner.split(":")[1]
            for now, key, owner in seen
            if key == f"twin/{t}"
            and runs.at[t, "start_time"] / 1000 <= now <= runs.at[t, "end_time"] / 1000
        }
        for t in ids
    }
    assert all(len(who) == 1 and who <= pids for who in trainers.values()), trainers
    both = set().union(*trainers.values()) == pids
    skipped = any("another runner" in log for log in logs)
    # both runners trained (different trials), or one saw the other's lease and says so
    assert both or skipped, f"one runner trained every trial: {trainers}"
    print(f"\ntrial -> the runner (of {sorted(pids)}) that trained it: {trainers}")


# --- the MLflow tracking server stopped and restarted mid-study ---------------------------------


class MlflowServer:
    """`mlflow server` on loopback over a sqlite store, restartable on the same port."""

    def __init__(self, root: Path) -> None:
        self.root, self.port = root, free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self, timeout: float = 180) -> None:
        self.starts += 1
        cmd = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--backend-store-uri",
            f"sqlite:///{self.root / 'mlflow.db'}",
            "--artifacts-destination",
            (self.root / "artifacts").as_uri(),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
        ]
        log = self.root / f"server{self.starts}.log"
        self.proc = start(cmd, log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited:\n{tail(log.read_text())}")
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.25)
        raise RuntimeError(f"mlflow server not up after {timeout} s:\n{tail(log.read_text())}")

    def stop(self) -> None:
        stop(self.proc, signal.SIGKILL)  # a crash: requests in flight are cut off


#: MLflow's HTTP retry budget per request (MLFLOW_HTTP_REQUEST_MAX_RETRIES with backoff factor
#: 1 sleeps 0, 2, 4, 8, ... s): "short" gives up within ~1 s of the outage (the runner must
#: stop and be rerun), "long" retries for ~60 s, longer than the ~20 s outage (a restart of the
#: server takes ~15 s on this machine), so the runner may ride through it.
RETRIES = {"short": "1", "long": "6"}


@pytest.mark.slow
@pytest.mark.parametrize("budget", list(RETRIES))
def test_tracking_server_restarted_mid_study(budget, tmp_path):
    study_file = write_study(tmp_path, "restart", seeds=(0, 1))  # 4 trials
    results = tmp_path / "results"
    (tmp_path / "server").mkdir()
    server = MlflowServer(tmp_path / "server")
    retries = dict(
        MLFLOW_HTTP_REQUEST_MAX_RETRIES=RETRIES[budget],
        MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR="1",
        MLFLOW_HTTP_REQUEST_TIMEOUT="10",
    )
    cmd = ablate_run(study_file, results, "--tracking-uri", server.uri)
    runner = None
    try:
        server.start()
        runner = start(cmd, tmp_path / "run1.log", **retries)
        trials = results / "restart" / "trials"
        deadline = time.monotonic() + 300
        while runner.poll() is None and time.monotonic() < deadline:  # the first checkpoint
            if list(trials.glob("*/checkpoints/step-*/manifest.json")):
                break
            time.sleep(0.05)
        assert runner.poll() is None, "the study ended before the server could be stopped"
        server.stop()
        time.sleep(6)
        server.start()
        runner.wait(timeout=300)
        log = (tmp_path / "run1.log").read_text()
        reruns = 0
        if runner.returncode == 0:
            path = "rode through the outage (MLflow's HTTP retries)"
            resumed = 0
        else:
            path = "stopped with one error, then rerun"
            assert runner.returncode == 2, tail(log)
            assert "results store cannot be written" in log, tail(log)
            assert "Traceback" not in log, tail(log)
            assert len(re.findall(r"^error: ", log, flags=re.M)) == 1, tail(log)
            code = 2
            while code != 0 and reruns < 2:
                reruns += 1
                code, log = run_to_end(cmd, tmp_path / f"rerun{reruns}.log", **retries)
            assert code == 0, f"still failing after {reruns} reruns:\n{tail(log)}"
            resumed = 1  # the trial the outage stopped, from its last checkpoint
        problems = ledger_problems(server.uri, study_file)  # read through the restarted server
        assert problems == [], f"{path}: {problems}"
        tags = sorted(resumes(server.uri, "restart").values())
        assert tags == ["0"] * (4 - resumed) + ["1"] * resumed, f"{path}: {tags}"
        if budget == "short":
            assert path.startswith("stopped"), "a ~1 s retry budget cannot ride out the outage"
        print(f"\n[{budget} retries] the runner {path}; reruns: {reruns}")
    finally:
        stop(runner)
        server.stop()


# --- a worker killed mid-trial on PostgreSQL, its trial taken over by other workers -------------


GRACE = 3  # seconds without a heartbeat before a RUNNING Optuna trial counts as dead


@pytest.mark.slow
def test_worker_killed_mid_trial_is_taken_over_on_postgres(postgres, tmp_path):
    import optuna

    study_file = write_study(tmp_path, "takeover", seeds=(0, 1))  # 2 arms x 2 seeds
    ids = trial_ids(study_file)
    results = tmp_path / "results"  # shared by all workers, as on one machine
    cmd = [
        sys.executable,
        "-m",
        "ablate.commands.cli",
        "worker",
        str(study_file),
        "--storage",
        postgres["optuna"],
        "--tracking-uri",
        postgres["mlflow"],
        "--results",
        str(results),
        "--threads",
        "1",
        "--heartbeat-interval",
        "1",
        "--grace-period",
        str(GRACE),
    ]
    code, log_a = run_to_end(cmd, tmp_path / "a.log", ABLATE_FAULT="step_logged@3")
    assert code == -signal.SIGKILL, f"worker A should have killed itself\n{tail(log_a)}"
    started = [t for t in ids if trial_dir(results, "takeover", t).exists()]
    assert len(started) == 1, started
    (killed,) = started
    assert checkpoint_steps(trial_dir(results, "takeover", killed)) == [2]  # A's, to resume from
    lease_db = lease_url(driver_url(postgres["mlflow"]), results)  # the tracking database
    assert [key for key, _ in leases_left(lease_db)] == [f"takeover/{killed}"]  # held by dead A
    time.sleep(GRACE + 1.5)  # A's Optuna trial is stale by the time B and C look for work

    workers = [start(cmd, tmp_path / f"{name}.log") for name in ("b", "c")]
    try:
        for w in workers:
            w.wait(timeout=400)
    finally:
        for w in workers:
            stop(w)
    logs = [(tmp_path / f"{name}.log").read_text() for name in ("b", "c")]

    assert [w.returncode for w in workers] == [0, 0], "\n---\n".join(tail(x) for x in logs)
    ran = [re.search(r"worker ran (\d+) trial", log) for log in logs]
    assert all(ran), logs
    assert sum(int(m.group(1)) for m in ran) == len(ids), logs  # A's trial trained once more
    uri = driver_url(postgres["mlflow"])
    assert ledger_problems(uri, study_file) == []
    expected = {t: "1" if t == killed else "0" for t in ids}
    assert resumes(uri, "takeover") == expected  # A's run resumed, from A's checkpoint
    assert leases_left(lease_db) == []  # A's taken over at once (a dead pid here), released

    storage = driver_url(postgres["optuna"])
    trials = optuna.load_study(study_name="takeover", storage=storage).get_trials()
    states = sorted((t.user_attrs.get(TRIAL_ATTR), t.number, t.state.name) for t in trials)
    a_trial = [t for t in trials if t.state.name == "FAIL" and t.user_attrs[TRIAL_ATTR] == killed]
    assert len(a_trial) == 1, states  # A's trial, failed as stale
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == a_trial[0].number]
    assert [t.user_attrs[TRIAL_ATTR] for t in retries] == [killed], states  # re-enqueued once
    assert not [t for t in trials if t.state.name in ("WAITING", "RUNNING")], states
    complete = sorted(t.user_attrs[TRIAL_ATTR] for t in trials if t.state.name == "COMPLETE")
    assert complete == sorted(ids), states


# --- the results folder stops accepting writes mid-trial (a real full filesystem) ---------------
# A read-only remount is refused while the database is open for writing ("mount point is busy")
# and permissions do not bind root, so the store is made unwritable by filling its disk.


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "300m"):
    """A small tmpfs at `path` (skips the test where mounting is not allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)])
    if made.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs CAP_SYS_ADMIN)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)])


def fill(path: Path) -> None:
    """Write zeros into `path` until the filesystem is full."""
    block = bytes(1 << 20)
    with open(path, "wb", buffering=0) as out, contextlib.suppress(OSError):
        while True:
            out.write(block)


@pytest.mark.slow
def test_results_disk_full_mid_trial_stops_in_one_line_then_recovers(tmp_path):
    study_file = write_study(tmp_path, "diskfull", seeds=(0, 1))
    with tmpfs(tmp_path / "fs") as fs:
        results = fs / "results"
        proc = start(ablate_run(study_file, results), tmp_path / "full.log")
        try:
            deadline = time.time() + 240
            trials = results / "diskfull" / "trials"
            while time.time() < deadline and proc.poll() is None:  # one checkpoint written
                if trials.exists() and any(checkpoint_steps(d) for d in trials.iterdir()):
                    break
                time.sleep(0.05)
            assert proc.poll() is None, tail((tmp_path / "full.log").read_text())
            fill(fs / "filler")
            proc.wait(timeout=240)
        finally:
            stop(proc)
        log = (tmp_path / "full.log").read_text()
        assert proc.returncode == 2 and "Traceback" not in log, tail(log)
        errors = [line for line in log.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "results store cannot be written" in errors[0], tail(log)
        (fs / "filler").unlink()  # space freed
        code, log = run_to_end(ablate_run(study_file, results), tmp_path / "rerun.log")
        assert code == 0, tail(log)
        uri = tracking.default_uri(results)
        assert ledger_problems(uri, study_file) == []


def _group_alive(pgid: int) -> list[int]:
    """Pids of live (not zombie) processes in process group `pgid`."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rpartition(")")[2].split()
            if fields[2] == str(pgid) and fields[0] != "Z":
                alive.append(int(stat.parent.name))
    return alive


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_coordinator_killed_its_workers_stop_cleanly_then_a_rerun_finishes(tmp_path):
    study_file = write_study(tmp_path, "orphans", seeds=(0,), tokens=40)  # 2 trials
    results = tmp_path / "results"
    proc = start([*ablate_run(study_file, results), "--workers", "2"], tmp_path / "run.log")
    try:
        trials = results / "orphans" / "trials"
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:  # both trials checkpointed
            if trials.is_dir() and len(list(trials.glob("*/checkpoints/step-*"))) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, tail((tmp_path / "run.log").read_text())
        proc.kill()  # the coordinator only: its workers are left to notice
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _group_alive(proc.pid), "workers outlived their coordinator"
    finally:
        stop(proc)
    log = (tmp_path / "run.log").read_text()
    assert "Traceback" not in log and "BrokenPipeError" not in log, tail(log)
    uri = tracking.default_uri(results)
    states = list(tracking.open_store(uri).runs("orphans").runs["status"])
    assert len(states) == 2 and "RUNNING" not in states, states  # each KILLED (or finished)
    code, log = run_to_end(ablate_run(study_file, results), tmp_path / "rerun.log")
    assert code == 0, tail(log)
    assert set(tracking.open_store(uri).runs("orphans").runs["status"]) == {"FINISHED"}
    assert ledger_problems(uri, study_file) == []
