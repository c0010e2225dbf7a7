"""`--launcher-opt key=value`: command-line values for a launcher's options record, each parsed
by the type its field declares (`int | None`, `float`, `bool`, `str`, a `Literal`, a mapping) and
checked before anything is created; a mapping field also takes one entry at a time
(`sbatch.account=rl`). A wrong key or value is a one-line `ConfigError` naming the valid ones."""

from __future__ import annotations

import ast
import dataclasses
import difflib
import math
import pathlib
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from ablate.base.errors import ConfigError
from ablate.launch.registry import option_names

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


class _Mismatch(Exception):
    """The text is not a value of the type; the message says what the type takes."""


def set_options(options: Any, items: Sequence[str], *, launcher: str) -> Any:
    """`options` with the `key=value` texts of `items` over it (a later key wins)."""
    hints = _hints(type(options))
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--launcher-opt expects key=value, got {item!r}")
        name, _, entry = key.partition(".")
        if name not in hints or (entry and not _is_mapping(hints[name])):
            raise ConfigError(_unknown(key, hints, launcher))
        try:
            if entry:  # one entry of a mapping field
                old = values.get(name, getattr(options, name))
                values[name] = {**old, entry: _parse(raw, _mapping_value(hints[name]))}
            else:
                values[name] = _parse(raw, hints[name], name)
        except _Mismatch as what:
            raise ConfigError(
                f"--launcher-opt {item}: option {key} of launcher {launcher!r} takes {what}"
            ) from None
    try:
        return dataclasses.replace(options, **values)
    except (TypeError, ValueError) as exc:  # the record's own checks (ConfigError is one)
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(f"--launcher-opt (launcher {launcher!r}): {exc}") from None


def _hints(options: type) -> dict[str, Any]:
    """Field name -> its declared type; a type that cannot be resolved takes any literal."""
    try:
        hints = get_type_hints(options)
    except (NameError, TypeError):
        hints = {}
    return {name: hints.get(name, Any) for name in option_names(options)}


def _unknown(key: str, hints: dict[str, Any], launcher: str) -> str:

    if not hints:
        return f"--launcher-opt {key}: launcher {launcher!r} takes no options"
    close = difflib.get_close_matches(key.partition(".")[0], list(hints), n=1, cutoff=0.6)
    mappings = [name for name, hint in hints.items() if _is_mapping(hint)]
    if not close and mappings and "." not in key:  # perhaps an entry of a mapping option
        close = [f"{mappings[0]}.{key}"]
    maybe = f" (did you mean {close[0]}?)" if close else ""
    return (
        f"--launcher-opt {key}: launcher {launcher!r} has no option {key!r}{maybe}; "
        f"its options: {', '.join(hints)}"
    )


def _is_mapping(hint: Any) -> bool:
    origin = get_origin(hint) or hint
    return isinstance(origin, type) and issubclass(origin, Mapping)


def _mapping_value(hint: Any) -> Any:
    args = get_args(hint)
    return args[1] if len(args) == 2 else Any


def _parse(raw: str, hint: Any, name: str = "name") -> Any:
    """The value of type `hint` that `raw` writes, or `_Mismatch` saying what the type takes
    (`name`: the option's, for the example a message gives)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return _parse_union(raw, args, name)
    if origin is Literal:
        for choice in args:
            if raw == str(choice):
                return choice
        raise _Mismatch("one of " + ", ".join(repr(c) for c in args))
    if hint is Any:
        return _literal(raw)
    if _is_mapping(hint):
        example = f"a mapping, e.g. {name}={{'key': 'value'}}, or one entry: {name}.key=value"
        return _parse_container(raw, dict, example)
    if origin in (tuple, list) or hint in (tuple, list):
        return _parse_container(raw, tuple, "a tuple, e.g. (1, 2)")
    parse = _SCALARS.get(hint)
    if parse is not None:
        return parse(raw.strip() if hint is not str else raw)
    if isinstance(hint, type) and issubclass(hint, pathlib.PurePath):
        return hint(raw)
    raise _Mismatch(f"a {getattr(hint, '__name__', hint)}, which the command line cannot write")


def _parse_union(raw: str, args: tuple[Any, ...], name: str) -> Any:
    optional = type(None) in args
    if optional and raw.strip() in ("None", "none", ""):
        return None
    wanted = []
    for arm in (a for a in args if a is not type(None)):
        try:
            return _parse(raw, arm, name)
        except _Mismatch as what:
            wanted.append(str(what))
    raise _Mismatch(" or ".join(wanted) + (" or None" if optional else ""))


def _literal(raw: str) -> Any:
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def _parse_container(raw: str, kind: type, what: str) -> Any:
    value = _literal(raw)
    if kind is dict and isinstance(value, dict):
        return value
    if kind is tuple and isinstance(value, tuple | list):
        return tuple(value)
    raise _Mismatch(what)


def _parse_int(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise _Mismatch("an integer") from None


def _parse_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise _Mismatch("a number") from None
    if not math.isfinite(value):
        raise _Mismatch("a finite number")
    return value


def _parse_bool(raw: str) -> bool:
    if raw.lower() in _TRUE + _FALSE:
        return raw.lower() in _TRUE
    raise _Mismatch("true or false")


_SCALARS: dict[Any, Callable[[str], Any]] = {
    int: _parse_int,
    float: _parse_float,
    bool: _parse_bool,
    str: lambda raw: raw,
}
