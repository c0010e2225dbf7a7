"""`--set name=value`: command-line overrides of a trial's settings.

A bare name is an `Algorithm` field (`scale=none`), an optimiser setting (`lr=1e-5`,
`grad_clip=0.5`) or a budget field (`group_size=4`, `temperature=0.7`: the rollout's); a prefixed
name says where it goes: `algo.`, `optim.`, `budget.` or `eval.` (`eval.max_problems=16`,
`eval.temperature=0.5`). Values are Python literals (`0.3`, `True`, `None`, `(1, 8)`), else
strings. Unknown names and values of the wrong type are a `ConfigError` naming the setting.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from collections.abc import Sequence
from typing import Any

from ablate.base.errors import ConfigError
from ablate.factors.algorithms import RENAMED, Algorithm, renamed_field
from ablate.factors.eval_spec import EvalSpec
from ablate.factors.spec import Budget, Optim

#: The parts of a trial `--set` reaches, in the order a bare name is looked up ('eval' only
#: with its prefix: its `temperature` would shadow the rollout's).
SECTIONS = ("algorithm", "optim", "budget", "eval")
PREFIXES = {
    "algo": "algorithm",
    "algorithm": "algorithm",
    "optim": "optim",
    "budget": "budget",
    "eval": "eval",
}
_BARE = ("algorithm", "optim", "budget")


def parse_value(raw: str) -> Any:
    """A Python literal (int, float, bool, None, tuple, …), else the text itself."""
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return raw


def parse_pairs(items: Sequence[str]) -> dict[str, Any]:
    """`name=value` items -> {name: typed value}, in order."""
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects name=value, got {item!r}")
        out[key.strip()] = parse_value(raw)
    return out


def _field_types() -> dict[str, dict[str, str]]:
    """section -> {field name: annotation text}."""

    classes = {"algorithm": Algorithm, "optim": Optim, "budget": Budget, "eval": EvalSpec}
    return {s: {f.name: str(f.type) for f in dataclasses.fields(classes[s])} for s in SECTIONS}


def split_overrides(items: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`--set` items -> {section: {field: value}} for every section of `SECTIONS`. Algorithm
    values are checked by `Algorithm` itself; the others' types here."""
    fields = _field_types()
    out: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}

    for name, value in parse_pairs(items).items():
        if name.rpartition(".")[2] in RENAMED:
            raise ConfigError("--set " + renamed_field(name.rpartition(".")[2], value))
        section, field = _locate(name, fields)
        if section != "algorithm" and not _fits(value, fields[section][field]):
            raise ConfigError(
                f"--set {name}={value!r}: {field} takes {fields[section][field]}, "
                f"got {type(value).__name__}"
            )
        if section != "algorithm" and isinstance(value, int) and "float" in fields[section][field]:
            value = float(value)
        out[section][field] = value
    return out


def _locate(name: str, fields: dict[str, dict[str, str]]) -> tuple[str, str]:
    prefix, dot, rest = name.partition(".")
    if dot:
        section = PREFIXES.get(prefix)
        if section is None:
            raise ConfigError(
                f"--set {name}: unknown prefix {prefix!r}; use one of {', '.join(PREFIXES)}"
            )
        if rest in fields[section]:
            return section, rest
        raise ConfigError(f"--set: {section} has no setting {rest!r}{_hint(rest, fields)}")
    for section in _BARE:
        if name in fields[section]:
            return section, name
    if name in fields["eval"]:
        raise ConfigError(f"--set {name}: an eval setting needs its prefix: eval.{name}")
    raise ConfigError(f"--set: unknown setting {name!r}{_hint(name, fields)}")


def _hint(name: str, fields: dict[str, dict[str, str]]) -> str:
    names = [n for s in _BARE for n in fields[s]] + [f"eval.{n}" for n in fields["eval"]]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    maybe = f"; did you mean {', '.join(close)}?" if close else ""
    return (
        f"{maybe} (--set takes an Algorithm field (`ablate show grpo`), an optimiser setting "
        f"({', '.join(fields['optim'])}), a budget field ({', '.join(fields['budget'])}) or "
        "eval.<field>)"
    )


def _fits(value: Any, annotation: str) -> bool:
    """Whether `value` has the type an annotation like 'int | None' or 'tuple[int, ...]' names."""
    checks = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "None": lambda v: v is None,
    }
    for part in (p.strip() for p in annotation.split("|")):
        check = checks.get(part)
        if part.startswith("tuple") and isinstance(value, tuple):
            return True
        if check is not None and check(value):
            return True
    return False


def describe(items: Sequence[str]) -> str:
    """The overrides as the user wrote them, for titles and arm names: `scale='none', lr=1e-05`."""
    return ", ".join(f"{k}={v!r}" for k, v in parse_pairs(items).items())
