"""A tracking server that stops answering, said within seconds: checked before a study starts
(one line), and during it one warning as its first request is retried, stating how long the
retries last, instead of minutes of silence (MLflow's own defaults retry 7 times with back-off
factor 2 and a 120 s timeout: ~4 min of sleeping, more if the server hangs).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import urllib.error
import urllib.request
import warnings

from ablate.base.errors import AblateWarning

#: MLflow's HTTP retries when the environment sets none: back-off 0, 2, 4, 8, 16 s (+ up to 1 s
#: of jitter each) between six tries, ~34 s, rides through a server restart (~15 s here); then
#: the study stops in one line.
RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "5",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}
#: Seconds the check before a study waits for the server's answer.
PROBE_TIMEOUT_S = 5.0


class TrackingServerWarning(AblateWarning):
    """The tracking server stopped answering; its requests are being retried."""


def is_http(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def server_problem(uri: str) -> str | None:
    """Why the tracking server at `uri` cannot be used now (it does not answer), or None. An
    HTTP error status is an answer: the server is up (its own errors come later, in its words)."""
    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return (
            f"tracking server {uri} does not answer ({reason}): start it, or pass another "
            "--tracking-uri"
        )


def retry_seconds() -> float:
    """The longest the back-off between MLflow's retries of one request lasts (urllib3 sleeps
    factor × 2^(n-1) before the n-th retry from the second on, plus up to `jitter`)."""
    retries = int(os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "7"))
    factor = float(os.environ.get("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "2"))
    jitter = float(os.environ.get("MLFLOW_HTTP_REQUEST_BACKOFF_JITTER", "1"))
    # urllib3 caps one sleep at 120 s
    return sum(min(factor * 2 ** (n - 1) + jitter, 120.0) for n in range(2, retries + 1))


class _RetryNotice(logging.Handler):
    """urllib3's "Retrying ..." log line -> one `TrackingServerWarning` per outage."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._last = -float("inf")
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if not record.getMessage().startswith("Retrying"):
            return
        span = retry_seconds()
        timeout = os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", "120")
        with self._lock:
            now = time.monotonic()
            if now - self._last <= span + float(timeout):  # the same outage
                return
            self._last = now
        warnings.warn(
            f"the tracking server stopped answering at {time.strftime('%H:%M:%S')}: retrying "
            f"for up to {span:.0f} s (each try waits up to {timeout} s for an answer); then the "
            "study stops and a rerun resumes it",
            TrackingServerWarning,
            stacklevel=2,
        )


_notice = _RetryNotice()


def prepare(uri: str) -> None:
    """Before a client of `uri` is built: bounded retries (unless the environment sets its
    own) and the retry warning."""
    if not is_http(uri):
        return
    for name, value in RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)
    pool = logging.getLogger("urllib3.connectionpool")
    if _notice not in pool.handlers:
        pool.addHandler(_notice)
        pool.propagate = False  # its own retry lines, one per try, would repeat ours
