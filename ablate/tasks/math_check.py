"""Time-limited MATH answer checking: normalised string equality, then math-verify in a worker.

math-verify's own timeout uses `signal.alarm`, which only works in the main thread: off it,
`parse` with a timeout fails and, unless asked to raise, quietly returns nothing (a silent 0).
And an alarm cannot interrupt sympy while it is inside C code. So math-verify runs in a separate,
persistent process (`_math_worker.py`) that the caller kills at the deadline; this works from any
thread, and a killed worker is restarted on the next call.
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

STARTUP_SECONDS = 60.0
_WORKER = Path(__file__).with_name("_math_worker.py")
_REMOVE = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "^\\circ", "^{\\circ}", "\\%", "%", "$")


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
    """A persistent math-verify worker; one request at a time (a lock serialises threads)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._buffer = b""
        self._lock = threading.Lock()
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
            ready = self._read_line(time.monotonic() + STARTUP_SECONDS)
        except BaseException:
            self._kill()
            raise
        if not json.loads(ready).get("ready"):
            self._kill()
            raise MathVerifyError("math-verify worker did not start")

    def equal(self, gold: str, pred: str, seconds: float) -> bool:
        """Whether math-verify judges `pred` equal to `gold`, within `seconds`.

        Raises VerifierTimeout or MathVerifyError; after a timeout the worker is killed."""
        deadline = time.monotonic() + seconds
        if not self._lock.acquire(timeout=max(seconds, 0.0)):
            raise VerifierTimeout("math-verify busy")
        try:
            if self._proc is None or self._proc.poll() is not None:
                self._spawn()
            request = {"gold": gold, "pred": pred, "seconds": seconds}
            self._proc.stdin.write((json.dumps(request) + "\n").encode())
            self._proc.stdin.flush()
            reply = json.loads(self._read_line(deadline))
        except BaseException:
            self._kill()  # a late reply would answer the next request
            raise
        finally:
            self._lock.release()
        if reply.get("timeout"):
            raise VerifierTimeout("math-verify timed out")
        if "error" in reply:
            raise MathVerifyError(reply["error"])
        return bool(reply["equal"])

    def _read_line(self, deadline: float) -> str:
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise VerifierTimeout("math-verify timed out")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise MathVerifyError("math-verify worker exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()

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
