"""Named fault points for the fault-injection tests: `ABLATE_FAULT=<point>@<step>` makes the
process kill itself with SIGKILL when it reaches `<point>` at trial step `<step>` (`*` = the
first time), so a test can stop a trial at an exact instant of its life instead of guessing
with timers; `<point>@<step>:SIGTERM` (or `:SIGINT`) sends that signal instead, as a user's
`kill` or Ctrl-C would; `<point>@<step>#<n>` fires the n-th time this process reaches it (e.g.
the second trial's checkpoint at that step, when one process trains several trials). Unset
(always, outside tests) a point costs one dict lookup.

Points: `step_logged` (a step's metrics handed to the tracker), `metrics_flushed` (the tracker
flushed, the checkpoint not yet written), `checkpoint_files_written` (inside the temporary
folder, before its manifest), `checkpoint_renamed` (a checkpoint complete), `final_eval`
(after the last eval is logged, before the run is closed), `metrics_append` (the file store's
metrics append, half of it on disk; at the step of its last row)."""

from __future__ import annotations

import os
import signal

ENV = "ABLATE_FAULT"

#: How often this process has reached the armed point (only the armed one is counted).
_reached = {"count": 0}


def point(name: str, step: int) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, _, at = spec.partition("@")
    at, _, signame = at.partition(":")
    at, _, nth = at.partition("#")
    if target == name and at in ("*", str(step)):
        _reached["count"] += 1
        if _reached["count"] == int(nth or 1):
            os.kill(os.getpid(), getattr(signal, signame or "SIGKILL"))
