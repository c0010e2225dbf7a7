"""A failure of the results store (the database, the tracking server, the lease database, the
disk) as one `StoreError` naming what failed, in the database's own words: the study stops in
one line, and a rerun once it is fixed resumes it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ablate.base.errors import StoreError
from ablate.study.study import Trial
from ablate.tracking import StudyStore


@contextlib.contextmanager
def store_errors(
    store: StudyStore, trial: Trial | None = None, where: str | None = None
) -> Iterator[None]:
    """A failure of the results store (database, tracking server, leases, disk), as the store
    classifies its own errors, raised as one `StoreError` naming `where` (default: the store's
    URI; the lease database's for lease calls)."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, StoreError) or not store.is_failure(exc):
            raise
        raise store_error(exc, trial, where or store.uri) from exc


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
    return StoreError(
        f"the results store cannot be written ({where}{failure_words(exc)}); the study "
        f"stopped{at}. Fix it and rerun: finished trials are kept and the others resume "
        "from their last checkpoint"
    )
