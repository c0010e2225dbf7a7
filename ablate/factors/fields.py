"""A record's field checks: each field's value against its declared type (`type_problems`), and
a record's own rules as {message: holds} (`listed_problems`). Shared by the trial, eval and
study specs; standard library only."""

from __future__ import annotations

import dataclasses
import math
from typing import Any


def listed_problems(obj: Any, checks: dict[str, bool]) -> list[str]:
    """The messages of `checks` ({message: holds}) that fail, each prefixed by the record's name."""
    return [f"{type(obj).__name__}: {msg}" for msg, ok in checks.items() if not ok]


#: A field's annotation -> (the values it accepts, how a message names them).
_KINDS: dict[str, tuple[Any, str]] = {
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (
        lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v),
        "a finite number",
    ),
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "str": (lambda v: isinstance(v, str), "a string"),
}


def type_problems(obj: Any) -> list[str]:
    """Each field whose value is not of its declared type, named (`max_steps='5' must be an
    integer`): checked before the range checks, which would fail on it with a bare TypeError."""
    out = []
    for f in dataclasses.fields(obj):
        value, kind = getattr(obj, f.name), str(f.type)
        optional = kind.endswith(" | None")
        base = kind.removesuffix(" | None")
        if optional and value is None:
            continue
        if base.startswith("tuple["):
            ok, what = isinstance(value, tuple | list), "a tuple"
            if ok and base.startswith("tuple[int"):
                ok = all(_KINDS["int"][0](v) for v in value)
                what = "a tuple of integers"
            elif ok and base.startswith("tuple[float"):
                ok = all(_KINDS["float"][0](v) for v in value)
                what = "a tuple of numbers"
        elif base in _KINDS:
            accepts, what = _KINDS[base]
            ok = accepts(value)
        else:
            continue
        if not ok:
            what += " or None" if optional else ""
            out.append(f"{type(obj).__name__}: {f.name}={value!r} must be {what}")
    return out
