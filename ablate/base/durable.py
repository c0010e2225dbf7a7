"""Files written for later reading (caches, manifests, state), and what a failed write means.

`write_atomic` writes to a temporary name beside the target, fsyncs it and renames it over the
target (then fsyncs the folder): a reader sees the old file or the new one, never a half, even
after a kill or a full disk. `read_valid` treats a file that is empty or does not parse as
absent, with a warning naming it, so the caller recomputes it.

`disk_error` turns what writer libraries raise when the disk fails (safetensors' own error type,
torch.save's RuntimeError, which carry no errno) into the `OSError` it stands for, so that a
full disk, a quota, a file-size limit or a read-only mount is recognised as the store's failure
wherever it strikes, not as the trial's (`DISK_ERRNOS`; `disk_hint` says what each means).

`read_json` reads a file a store keeps (a run's JSON, a submission): a file that is not whole
JSON is a `StoreError` naming it and what to do, never a traceback from deep inside a command.
`too_long` says in one line which part of a path is past the file system's limits.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import resource
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ablate.base.errors import AblateWarning, StoreError

T = TypeVar("T")

#: Errors that mean the disk, not the data, failed, and what each asks of the user.
DISK_HINTS = {
    errno.ENOSPC: "the disk is full: free space",
    errno.EDQUOT: "over the disk quota: free space or raise the quota",
    errno.EFBIG: "over the file-size limit (ulimit -f): raise it",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EIO: "an I/O error: check the disk",
}
DISK_ERRNOS = tuple(DISK_HINTS)
#: Rust's std::io error as safetensors prints it: "... (os error 28)".
_OS_ERROR = re.compile(r"\(os error (\d+)\)")
#: torch.save's C++ writer failing (a short write: "file write failed", "unexpected pos").
_TORCH_WRITER = ("PytorchStreamWriter", "inline_container", "file write failed", "unexpected pos")


class UnreadableFileWarning(AblateWarning):
    """A file written for later reading was empty or partial; it is recomputed."""


def fsync_path(path: str | os.PathLike) -> None:
    """Flush `path` (a file or a folder) to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write `data` to `path` through a fsynced temporary file renamed over it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    blob = data.encode() if isinstance(data, str) else data
    try:
        with named(tmp), open(tmp, "wb") as handle:
            handle.write(blob)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_path(path.parent)
    return path


@contextlib.contextmanager
def named(path: str | os.PathLike):
    """An `OSError` raised inside without a file name (a write's, an fsync's) carries `path`,
    so that the one line a disk error becomes names the file that failed."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def read_valid(path: str | os.PathLike, parse: Callable[[Path], T], what: str) -> T | None:
    """`parse(path)`, or None when the file is missing, empty or does not parse (then with a
    warning naming it and ending with `what` happens instead, e.g. "it is measured again")."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        if path.stat().st_size == 0:
            raise ValueError("empty file")
        return parse(path)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        warnings.warn(
            f"{path} is empty or partial ({reason}): {what}",
            UnreadableFileWarning,
            stacklevel=2,
        )
        return None


def is_disk_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def disk_hint(exc: BaseException) -> str:
    """What a disk error asks of the user ("the disk is full: free space"), or ""."""
    return DISK_HINTS.get(exc.errno, "") if isinstance(exc, OSError) else ""


def read_json(path: str | os.PathLike, fix: str, missing: Any = None) -> Any:
    """The JSON at `path` (`missing` when there is no such file). A file that is there but not
    whole JSON (damaged, cut short, edited by hand) is a `StoreError` naming it, why, and `fix`
    (what to do about it): the command stops in one line instead of a traceback."""
    return read_whole(path, json.loads, fix, missing)


def read_whole(path: str | os.PathLike, parse: Callable[[str], T], fix: str, missing: Any = None):
    """`parse` of the text at `path` (`missing` when there is none); a damaged file (it does not
    parse, or is not text) is a `StoreError` naming it and `fix`."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return missing
    except UnicodeDecodeError as exc:
        raise StoreError(f"{path} is damaged (not text: {exc.reason}): {fix}") from None
    try:
        return parse(text)
    except ValueError as exc:
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "empty"
        what = "empty" if not text.strip() else f"{type(exc).__name__}: {reason}"
        raise StoreError(f"{path} is damaged ({what}): {fix}") from None


def too_long(exc: OSError) -> str:
    """One line for a path past the file system's limits (ENAMETOOLONG): which part of it is
    too long, by how much, and the path itself shortened to its two ends."""
    path = os.fsdecode(exc.filename) if exc.filename else ""
    parts = [p for p in path.split(os.sep) if p]
    longest = max(parts, key=lambda p: len(os.fsencode(p)), default="")
    name_max, path_max = _limits(path)
    size, name = len(os.fsencode(path)), len(os.fsencode(longest))
    if name > name_max:
        why = f"a name of {name:,} bytes, over the file system's {name_max:,}"
    else:
        why = f"{size:,} bytes, over the file system's {path_max:,} for a path"
    shown = path if len(path) <= 120 else f"{path[:60]}…{path[-55:]}"
    return f"path too long ({why}): {shown}: shorten it (--results, --tracking-uri, study name)"


def _limits(path: str) -> tuple[int, int]:
    """(longest name, longest path) in bytes on the file system of `path`'s nearest existing
    folder; Linux's usual 255 and 4096 where it cannot be asked."""
    probe = Path(os.path.abspath(path or "."))
    while True:
        try:
            if probe.exists():
                break
        except OSError:  # a parent itself too long to stat
            pass
        if probe == probe.parent:
            break
        probe = probe.parent
    try:
        return os.pathconf(probe, "PC_NAME_MAX"), os.pathconf(probe, "PC_PATH_MAX")
    except (OSError, ValueError):
        return 255, 4096


def disk_error(exc: BaseException, path: str | os.PathLike) -> OSError | None:
    """The `OSError` a writer library's failure to write under `path` stands for, or None
    when it is not the disk's. An OSError is itself; safetensors' error carries the errno in its
    text; torch.save's short write carries none, so a full filesystem is checked directly."""
    if isinstance(exc, OSError):
        return exc if exc.errno in DISK_ERRNOS else None
    text = str(exc)
    if type(exc).__name__ == "SafetensorError":
        found = _OS_ERROR.search(text)
        code = int(found.group(1)) if found else None
    elif isinstance(exc, RuntimeError) and any(mark in text for mark in _TORCH_WRITER):
        code = _short_write(path)
    else:
        return None
    if code not in DISK_ERRNOS:
        return None
    return OSError(code, f"{os.strerror(code)} ({type(exc).__name__})", str(path))


def _short_write(path: str | os.PathLike) -> int:
    """The errno a short write under `path` most likely stands for: a full disk, else a
    file-size limit of this process (`ulimit -f`), else an I/O error."""
    if _full(path):
        return errno.ENOSPC
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    return errno.EIO if soft == resource.RLIM_INFINITY else errno.EFBIG


def _full(path: str | os.PathLike) -> bool:
    """Whether the filesystem holding `path` (or its nearest existing parent) has no room."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        stat = os.statvfs(probe)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < 1 << 20
