"""A SQL statement that waits (sqlite's busy wait on a database another process holds, a lock in
PostgreSQL) is said every few seconds while it lasts (`ablate.base.waits`): one SQLAlchemy
listener for every engine of the process, registered when the first store or lease engine is
made; each statement opens a wait and closes it when it returns or fails."""

from __future__ import annotations

import functools
from typing import Any

from ablate.base.waits import WAITS

_KEY = "ablate_waits"


@functools.lru_cache(maxsize=32)
def _what(url: Any) -> str:
    shown = url.render_as_string(hide_password=True)
    return f"the database {shown}, which another process may hold locked"


def _begin(conn: Any, *_: Any) -> None:
    conn.info.setdefault(_KEY, []).append(WAITS.begin(_what(conn.engine.url)))


def _end(conn: Any, *_: Any) -> None:
    tokens = conn.info.get(_KEY)
    if tokens:
        WAITS.end(tokens.pop())


def _failed(context: Any) -> None:
    if context.connection is not None:
        _end(context.connection)


@functools.cache
def watch_sql() -> None:
    """Say every SQL statement of this process that waits (once per process; idempotent)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "before_cursor_execute", _begin)
    event.listen(Engine, "after_cursor_execute", _end)
    event.listen(Engine, "handle_error", _failed)
