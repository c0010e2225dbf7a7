"""Typed errors a user can cause. The CLI prints them as one message, never a traceback."""

from __future__ import annotations

import dataclasses
import difflib
import re
import signal
from collections.abc import Iterable, Mapping
from typing import Any


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """` (did you mean X?)` for the choice closest to a misspelt `name`, or "" when none is close
    (difflib's ratio ≥ 0.6: `scael` finds `scale`, `lr` finds nothing among long names)."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


_UNEXPECTED = re.compile(r"(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'")


def keyword_hint(namespace: Mapping[str, Any], exc: BaseException) -> str:
    """` (did you mean base_models?)` for Python's "X.__init__() got an unexpected keyword
    argument" when X is a record (a dataclass) named in `namespace` (a study file's globals):
    `Study(models=...)`, `Budget(group_szie=...)`; "" for any other error."""
    found = _UNEXPECTED.fullmatch(str(exc)) if isinstance(exc, TypeError) else None
    record = namespace.get(found.group(1)) if found else None
    if not (isinstance(record, type) and dataclasses.is_dataclass(record)):
        return ""
    return did_you_mean(found.group(2), [f.name for f in dataclasses.fields(record) if f.init])


class AblateError(Exception):
    """Base of every error ablate raises on purpose."""


class ConfigError(AblateError, ValueError):
    """An invalid algorithm, trial or tool setting; the message says how to fix it."""


class StudyError(AblateError, ValueError):
    """A study that cannot run; the message lists every problem at once."""


class TrialError(AblateError, RuntimeError):
    """A trial that cannot continue for a reason its data explains (e.g. dynamic sampling
    found too few informative groups); the trial ends with outcome 'failed' and this message."""


class DivergedError(AblateError, FloatingPointError):
    """A non-finite loss, gradient or weight: the trial ends with outcome 'diverged'."""

    def __init__(self, step: int, quantity: str) -> None:
        super().__init__(f"diverged at step {step}: {quantity} is not finite")
        self.step = step
        self.quantity = quantity


class StoreError(AblateError, RuntimeError):
    """The results store (MLflow database or server, results folder) cannot be written: the
    study stops, and a rerun once it is fixed resumes where it stopped."""


class AblateWarning(UserWarning):
    """A legal but questionable setting; the CLI prints it as one line."""


class StudyWarning(AblateWarning):
    """A study that runs but whose comparisons may not mean what they seem (e.g. arms that
    differ from the reference in an undeclared update schedule); the message says the fix."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM, raised where the process is: what runs stops as after Ctrl-C (a
    trial's run is marked KILLED, its lease released, the study's parent closed KILLED)."""

    def __init__(self, signum: int) -> None:

        super().__init__(signal.Signals(signum).name)
        self.signum = signum
