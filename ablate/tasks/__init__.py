"""Tasks: problems with stable ids and time-limited verifiers that never raise.

`get_task(name, **options)` builds one. Importing this package imports every module beside it
(those not starting with "_"), so a task is registered by its own module's `@register_task`: a
new task is one new file here.
"""

from __future__ import annotations

import importlib
import pkgutil

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

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_module.name}")
