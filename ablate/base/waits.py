"""Waits said while they last: a process blocked on a lock (the results folder's setup lock, a
file store's run lock, a sqlite database another process holds) says what it waits for every few
seconds instead of sitting silent.

`WAITS.waiting(what)` marks a wait; one daemon thread per process (started at the first wait)
looks at the open waits every second and, for each open longer than `every` seconds since it
began or was last said, emits `still waiting for <what>: N s so far` as a `WaitWarning`, which
the CLI prints as one `warning:` line. The clock and the sink are injectable, and `due()` (what
the thread calls) can be called directly: a test moves the clock instead of sleeping.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator

from ablate.base.errors import AblateWarning

#: Seconds between two notices of one wait.
EVERY_S = 5.0
#: Seconds between two looks of the watching thread.
TICK_S = 1.0


class WaitWarning(AblateWarning):
    """A wait on a lock or a database that lasts: said every `EVERY_S` seconds while it does."""


def _warn(message: str) -> None:
    warnings.warn(message, WaitWarning, stacklevel=2)


class Waits:
    """The open waits of this process (see the module doc)."""

    def __init__(
        self,
        every: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        say: Callable[[str], None] = _warn,
    ) -> None:
        self.every, self.clock, self.say = every, clock, say
        self._open: dict[int, list] = {}  # token -> [what, began, last said]
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._thread_pid: int | None = None
        self.threads = True
        """False: no watching thread (a test calls `due` itself)."""

    def begin(self, what: str) -> int:
        """Open a wait for `what` (the watching thread started if this process has none); its
        token for `end`."""
        if self._thread_pid != os.getpid():
            self.start()
        now = self.clock()
        with self._lock:
            token = next(self._ids)
            self._open[token] = [what, now, now]
        return token

    def end(self, token: int) -> None:
        with self._lock:
            self._open.pop(token, None)

    @contextlib.contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """The block waits for `what`: said while it lasts."""
        token = self.begin(what)
        try:
            yield
        finally:
            self.end(token)

    def due(self) -> list[str]:
        """Notices of the waits open for `every` seconds since they began or were last said
        (each marked said now); what the watching thread emits."""
        now = self.clock()
        out = []
        with self._lock:
            for wait in self._open.values():
                what, began, said = wait
                if now - said >= self.every:
                    wait[2] = now
                    out.append(f"still waiting for {what}: {now - began:.0f} s so far")
        return out

    def start(self) -> None:
        """Start the watching thread, unless this process runs it already."""
        with self._lock:
            if self._thread_pid == os.getpid() or not self.threads:  # a fork starts its own
                return
            self._thread_pid = os.getpid()
        threading.Thread(target=self._run, name="ablate-waits", daemon=True).start()

    def _run(self) -> None:
        tick = threading.Event()
        while not tick.wait(TICK_S):
            for message in self.due():
                with contextlib.suppress(Exception):  # a notice never breaks the wait itself
                    self.say(message)


#: This process's waits.
WAITS = Waits()


def waiting(what: str) -> contextlib.AbstractContextManager[None]:
    """`with waiting("the lock on X"):` around a call that may block: said while it lasts."""
    return WAITS.waiting(what)
