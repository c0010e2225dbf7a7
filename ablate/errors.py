"""Typed errors a user can cause. The CLI prints them as one message, never a traceback."""

from __future__ import annotations


class AblateError(Exception):
    """Base of every error ablate raises on purpose."""


class ConfigError(AblateError, ValueError):
    """An invalid algorithm, trial or tool setting; the message says how to fix it."""


class StudyError(AblateError, ValueError):
    """A study that cannot run; the message lists every problem at once."""
