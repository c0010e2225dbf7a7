"""Tasks: problems with stable ids and time-limited verifiers that never raise.

`get_task(name, **options)` builds one; importing this package registers every task.
"""

from __future__ import annotations

from ablate.tasks import arithmetic, countdown, local_data  # noqa: F401  (registers the tasks)
from ablate.tasks.base import (
    CHARSET,
    Problem,
    Task,
    Verdict,
    get_task,
    synthetic_charset,
    task_names,
)

__all__ = [
    "CHARSET",
    "Problem",
    "Task",
    "Verdict",
    "get_task",
    "synthetic_charset",
    "task_names",
]
