"""A failure of the results store (the database, the tracking server, the lease database, the
disk) as one `StoreError` naming what failed, in the database's own words: the study stops in
one line, and a rerun once it is fixed resumes it. The store and its lease table each classify
their own errors (`ablate.tracking.is_failure`, `LeaseTable.is_failure`)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ablate import tracking
from ablate.base.durable import disk_hint, is_disk_error
from ablate.base.errors import AblateError, StoreError
from ablate.base.sql_urls import sqlite_file_problem
from ablate.study.study import Trial
from ablate.tracking import LeaseTable, StudyStore


@contextlib.contextmanager
def stop_on(
    is_failure: Callable[[BaseException], bool], where: str, trial: Trial | None = None
) -> Iterator[None]:
    """An error `is_failure` accepts, raised as one `StoreError` naming `where`."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, StoreError) or not is_failure(exc):
            raise
        raise store_error(exc, trial, where) from exc


def store_errors(
    store: StudyStore, trial: Trial | None = None, where: str | None = None
) -> contextlib.AbstractContextManager[None]:
    """A failure of the results store (database, tracking server, disk), as the store classifies
    its own errors, raised as one `StoreError` naming `where` (default: the store's URI)."""
    return stop_on(lambda exc: tracking.is_failure(store, exc), where or store.uri, trial)


def lease_errors(
    leases: LeaseTable, trial: Trial | None = None
) -> contextlib.AbstractContextManager[None]:
    """A failure of the lease table's database, raised as one `StoreError` naming it."""
    return stop_on(leases.is_failure, leases.url, trial)


def failure_words(exc: BaseException) -> str:
    """`Type: first line` of the innermost cause: the database's own words, not a wrapper's."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {first[:300]}"


def store_error(exc: BaseException, trial: Trial | None = None, uri: str = "") -> StoreError:
    """The StoreError of `exc`, naming `uri` (the store that failed), or the file when the disk
    failed under a file of the results folder (a checkpoint, a cache)."""
    if isinstance(exc, OSError) and exc.filename:
        uri = str(exc.filename)
    at = "" if trial is None else f" at trial {trial.id} ({trial.arm}, seed {trial.spec.seed})"
    where = f"{uri}: " if uri else ""
    hint = f": {disk_hint(exc)}" if disk_hint(exc) else ""
    return StoreError(
        f"the results store cannot be written ({where}{failure_words(exc)}{hint}); the study "
        f"stopped{at}. Fix it and rerun: finished trials are kept and the others resume "
        "from their last checkpoint"
    )


@contextlib.contextmanager
def read_errors(uri: str) -> Iterator[None]:
    """A results store that cannot be read (a damaged database, a server that does not answer)
    as one `StoreError` naming it, for the commands that only read (`report`, `status`); a
    disk that cannot take what they write is said by the CLI."""
    if problem := sqlite_file_problem(uri):
        raise StoreError(problem)
    store = tracking.open_store(uri)
    if problem := tracking.read_problem(store):
        raise StoreError(problem)
    try:
        yield
    except Exception as exc:
        if (
            isinstance(exc, AblateError)
            or is_disk_error(exc)
            or not tracking.is_failure(store, exc)
        ):
            raise
        mend = f"; if an upgrade was stopped in it: ablate repair --tracking-uri {uri}"
        raise StoreError(
            f"the results store {uri} cannot be read ({failure_words(exc)}): restore it, or "
            "pass another --results or --tracking-uri"
            + (mend if hasattr(store, "repair") and uri.startswith("sqlite:") else "")
        ) from exc
