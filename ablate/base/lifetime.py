"""A process's life tied to what it serves: signals that stop it as Ctrl-C does, and children
that stop when their parent is gone (a `--workers N` coordinator, `ablate ui`), whatever ended it.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable

from ablate.base.errors import Interrupted

#: prctl's option that makes the kernel send a signal to a process when its parent dies.
PR_SET_PDEATHSIG = 1


#: The signals `interrupt_on`'s handler received, oldest first (a caller whose library reworded
#: the `Interrupted` it raised, as typer turns it into exit status 130, still knows which).
received: list[int] = []


def interrupt_on(*signums: int) -> None:
    """Raise `Interrupted` in the main thread on the first of `signums` to come (later ones
    are recorded only, while what runs closes; from the main thread only: elsewhere Python
    cannot install handlers)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        received.append(signum)
        if len(received) > 1:  # a second Ctrl-C must not break off the closing the first began
            return
        raise Interrupted(signum)

    for signum in signums:
        signal.signal(signum, handler)


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Have the kernel send `signum` to this process when its parent dies (Linux; elsewhere
    nothing: `watch_parent` covers it). Safe in a `preexec_fn`."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)


def watch_parent(on_gone: Callable[[], None], every_s: float = 0.5) -> threading.Thread:
    """Call `on_gone` once this process's parent is gone (it is then reparented), from a daemon
    thread polling every `every_s` seconds."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        on_gone()

    thread = threading.Thread(target=watch, name="watch-parent", daemon=True)
    thread.start()
    return thread
