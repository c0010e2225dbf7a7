"""Files written for later reading (caches, manifests, state), and what a failed write means.

`write_atomic` writes to a temporary name beside the target, fsyncs it and renames it over the
target (then fsyncs the folder): a reader sees the old file or the new one, never a half, even
after a kill or a full disk. `read_valid` treats a file that is empty or does not parse as
absent, with a warning naming it, so the caller recomputes it.

`disk_error` turns what writer libraries raise when the disk fails (safetensors' own error type,
torch.save's RuntimeError, which carry no errno) into the `OSError` it stands for, so that a
full disk is recognised as the store's failure wherever it strikes, not as the trial's.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ablate.base.errors import AblateWarning

T = TypeVar("T")

#: Errors that mean the disk, not the data, failed: read-only, forbidden, full, over quota, I/O.
DISK_ERRNOS = (errno.EROFS, errno.EACCES, errno.ENOSPC, errno.EDQUOT, errno.EIO)
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
        with open(tmp, "wb") as handle:
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
        code = errno.ENOSPC if _full(path) else errno.EIO
    else:
        return None
    if code not in DISK_ERRNOS:
        return None
    return OSError(code, f"{os.strerror(code)} ({type(exc).__name__})", str(path))


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
