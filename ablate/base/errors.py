"""Typed errors a user can cause. The CLI prints them as one message, never a traceback."""

from __future__ import annotations

import signal


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
