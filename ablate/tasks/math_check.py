"""Time-limited MATH answer checking: normalised string equality, then math-verify in a worker.

math-verify's own timeout uses `signal.alarm`, which only works in the main thread: off it,
`parse` with a timeout fails and, unless asked to raise, quietly returns nothing (a silent 0).
And an alarm cannot interrupt sympy while it is inside C code. So math-verify runs in a separate,
persistent process (`_math_worker.py`) that the caller kills when it overruns; this works from any
thread, and a killed worker is restarted on the next call.

Every limit is CPU time, never wall time, so a busy machine cannot turn a correct answer into a
timeout: the worker stops a request at its CPU seconds, and the caller kills a worker whose CPU
time (read from /proc) passes them by `CPU_GRACE` without a reply. Wall time bounds only a worker
the machine gives no CPU at all (`STARVED_SECONDS`): a verifier error, never a wrong answer.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

#: CPU seconds the worker may take to start (importing sympy and warming math-verify up).
STARTUP_CPU_SECONDS = 60.0
#: CPU seconds past a request's limit before the caller kills a worker stuck in C code.
CPU_GRACE = 0.5
#: Wall seconds a request may wait while its worker gets no CPU (a starved, not a slow, machine).
STARVED_SECONDS = 600.0
#: Wall seconds between two reads of a silent worker's CPU time.
POLL_SECONDS = 0.1
_WORKER = Path(__file__).with_name("_math_worker.py")
_REMOVE = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "^\\circ", "^{\\circ}", "\\%", "%", "$")


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` (Linux's /proc), or None where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # after the command's ")": state is field 3, utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class VerifierTimeout(Exception):
    """math-verify did not answer within the time limit."""


class MathVerifyError(Exception):
    """math-verify failed on an input (reported, never counted as a plain wrong answer)."""


def normalize_math(answer: str) -> str:
    """A canonical string form: spacing and sizing commands, `$`, degrees, `%`, `\\text{}` and a
    final period removed; `dfrac` / `tfrac` as `frac`."""
    text = answer.strip()
    if text.startswith("\\text{") and text.endswith("}"):
        text = text[len("\\text{") : -1]
    for token in _REMOVE:
        text = text.replace(token, "")
    text = text.replace("dfrac", "frac").replace("tfrac", "frac")
    return "".join(text.split()).rstrip(".")


class MathVerifier:
    """A persistent math-verify worker; one request at a time (a lock serialises threads).

    `last_cpu_seconds`: the CPU time the last request used in the worker (what its limit is on)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._buffer = b""
        self._lock = threading.Lock()
        self.last_cpu_seconds = 0.0
        atexit.register(self.close)

    def start(self) -> None:
        """Start the worker if it is not running (start-up is not part of any time limit)."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._spawn()

    def _spawn(self) -> None:
        env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1")
        self._proc = subprocess.Popen(
            [sys.executable, str(_WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self._buffer = b""
        try:
            ready = self._read_line(STARTUP_CPU_SECONDS)
        except BaseException:
            self._kill()
            raise
        if not json.loads(ready).get("ready"):
            self._kill()
            raise MathVerifyError("math-verify worker did not start")

    def equal(self, gold: str, pred: str, seconds: float) -> bool:
        """Whether math-verify judges `pred` equal to `gold`, within `seconds` of CPU time.

        Raises VerifierTimeout or MathVerifyError; after a timeout the worker is killed."""
        # waiting for another thread's request is not this request's time: no limit on the lock
        with self._lock:
            try:
                if self._proc is None or self._proc.poll() is not None:
                    self._spawn()
                request = {"gold": gold, "pred": pred, "seconds": max(seconds, 1e-3)}
                self._proc.stdin.write((json.dumps(request) + "\n").encode())
                self._proc.stdin.flush()
                reply = json.loads(self._read_line(max(seconds, 0.0) + CPU_GRACE))
            except BaseException:
                self._kill()  # a late reply would answer the next request
                raise
        self.last_cpu_seconds = float(reply.get("cpu", 0.0))
        if reply.get("timeout"):
            raise VerifierTimeout(f"math-verify used its {seconds:.2g} s of CPU")
        if "error" in reply:
            raise MathVerifyError(reply["error"])
        return bool(reply["equal"])

    def _read_line(self, cpu_seconds: float) -> str:
        """The worker's next line, unless it uses `cpu_seconds` more CPU (or starves) first."""
        fd, pid = self._proc.stdout.fileno(), self._proc.pid
        cpu_start = process_cpu_seconds(pid)
        wall_start = time.monotonic()
        while b"\n" not in self._buffer:
            if not select.select([fd], [], [], POLL_SECONDS)[0]:
                self._check_overrun(pid, cpu_start, cpu_seconds, wall_start)
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise MathVerifyError("math-verify worker exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

    @staticmethod
    def _check_overrun(pid: int, cpu_start: float | None, limit: float, wall_start: float) -> None:
        waited = time.monotonic() - wall_start
        now = process_cpu_seconds(pid)
        # without /proc (not Linux) the wall time stands in for the CPU time: load-dependent
        used = waited if now is None or cpu_start is None else now - cpu_start
        if used > limit:
            raise VerifierTimeout(f"math-verify used {used:.2g} s of CPU without answering")
        if waited > STARVED_SECONDS:
            raise VerifierTimeout(f"math-verify got no CPU for {STARVED_SECONDS:.0f} s")

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            for pipe in (self._proc.stdin, self._proc.stdout):
                with contextlib.suppress(OSError):  # unflushed data for a dead process
                    pipe.close()
        self._proc = None
        self._buffer = b""

    def close(self) -> None:
        """Stop the worker (also registered with atexit)."""
        self._kill()


_shared: MathVerifier | None = None


def shared_verifier() -> MathVerifier:
    """The process-wide worker (started lazily)."""
    global _shared
    if _shared is None:
        _shared = MathVerifier()
    return _shared
