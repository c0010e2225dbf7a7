"""Named fault points for the fault-injection tests: `ABLATE_FAULT=<point>@<step>` makes the
process kill itself with SIGKILL when it reaches `<point>` at trial step `<step>` (`*` = the
first time), so a test can stop a trial at an exact instant of its life instead of guessing
with timers; `<point>@<step>:SIGTERM` (or `:SIGINT`) sends that signal instead, as a user's
`kill` or Ctrl-C would. Unset (always, outside tests) a point costs one dict lookup.

Points: `step_logged` (a step's metrics handed to the tracker), `metrics_flushed` (the tracker
flushed, the checkpoint not yet written), `checkpoint_files_written` (inside the temporary
folder, before its manifest), `checkpoint_renamed` (a checkpoint complete), `final_eval`
(after the last eval is logged, before the run is closed), `metrics_append` (the file store's
metrics append, half of it on disk; at the step of its last row)."""

from __future__ import annotations

import os
import signal

ENV = "ABLATE_FAULT"


def point(name: str, step: int) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    target, _, at = spec.partition("@")
    at, _, signame = at.partition(":")
    if target == name and at in ("*", str(step)):
        os.kill(os.getpid(), getattr(signal, signame or "SIGKILL"))
