"""A record's field checks, declared once and checked by one function, `record_problems`: each
field's value against its annotated type (`type_problems`: an integer, a finite number, text, a
sequence or mapping of them), then against the rules its record declares in a small table
(`RULES: ClassVar[dict[str, Rule]]`: a range, choices, non-empty, a length in bytes, the
characters of a text, the keys of a mapping), then nested records the same way (a `PassKSpec`'s
`ElicitSpec`). A record's cross-field rules stay in its own `problems()` as {message: holds}
(`listed_problems`). Every user-facing option record (budget, eval, Pass@G, elicitation, a
launcher's options) is checked by it when it is built, so that a bad value is one line before
anything is created or computed. Standard library only."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def listed_problems(obj: Any, checks: dict[str, bool]) -> list[str]:
    """The messages of `checks` ({message: holds}) that fail, each prefixed by the record's name."""
    return [f"{type(obj).__name__}: {msg}" for msg, ok in checks.items() if not ok]


def _finite(v: Any) -> bool:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int too large for a float
        return False


#: An annotation's item type -> (the values it accepts, how a message names one, and several).
_KINDS: dict[str, tuple[Callable[[Any], bool], str, str]] = {
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer", "integers"),
    "float": (_finite, "a finite number", "finite numbers"),
    "bool": (lambda v: isinstance(v, bool), "True or False", "True or False"),
    "str": (lambda v: isinstance(v, str), "a string", "strings"),
}
_SEQUENCES = ("tuple[", "Sequence[", "list[")
_MAPPINGS = ("Mapping[", "dict[")


@dataclass(frozen=True)
class Rule:
    """What a field accepts besides its type: None (for an optional field) always passes; the
    bounds, choices and text rules apply to each item of a sequence."""

    low: float | None = None
    """value >= low."""
    above: float | None = None
    """value > above."""
    high: float | None = None
    """value <= high."""
    below: float | None = None
    """value < below."""
    choices: tuple[Any, ...] = ()
    """The values accepted (empty: any)."""
    nonempty: bool = False
    """A sequence, mapping or text must hold at least one item."""
    max_bytes: int | None = None
    """A text's longest UTF-8 length (a file name's component is at most 255 bytes)."""
    pattern: str | None = None
    """A regular expression a text must match whole; `says` gives it in words."""
    says: str = ""
    keys: Callable[[str], str | None] | None = None
    """A mapping's keys: why a key is refused, or None when it is accepted."""
    note: str = ""
    """Said after the rule, e.g. "0 = off"."""

    def bound(self) -> str:
        """The range as words: ">= 1", "> 0", "in [0, 1)"."""
        lo = f"[{self.low:g}" if self.low is not None else None
        lo = f"({self.above:g}" if self.above is not None else lo
        hi = f"{self.high:g}]" if self.high is not None else None
        hi = f"{self.below:g})" if self.below is not None else hi
        if lo and hi:
            return f"in {lo}, {hi}"
        if lo:
            return f"{'>=' if lo[0] == '[' else '>'} {lo[1:]}"
        return f"{'<=' if hi[-1] == ']' else '<'} {hi[:-1]}" if hi else ""

    def holds(self, v: Any) -> bool:
        return not (
            (self.low is not None and not v >= self.low)
            or (self.above is not None and not v > self.above)
            or (self.high is not None and not v <= self.high)
            or (self.below is not None and not v < self.below)
        )


def record_problems(obj: Any, prefix: str = "") -> list[str]:
    """Every problem of the record `obj` in one pass: its fields' types (when any is wrong, only
    those: the rules would fail on them with a bare TypeError), then its declared `RULES`, then
    each nested record's (prefixed by the field's name)."""
    if wrong := type_problems(obj):
        return [prefix + w for w in wrong]
    out = []
    rules: Mapping[str, Rule] = getattr(type(obj), "RULES", {})
    kinds = {f.name: str(f.type) for f in dataclasses.fields(obj)}
    for name, rule in rules.items():
        if (problem := rule_problem(getattr(obj, name), name, rule, kinds[name])) is not None:
            out.append(f"{prefix}{type(obj).__name__}: {problem}")
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            inner = f"{prefix[:-2]}.{f.name}: " if prefix.endswith(": ") else f"{f.name}: "
            out += record_problems(value, inner)
    return out


def rule_problem(value: Any, name: str, rule: Rule, kind: str = "") -> str | None:
    """What is wrong with the value of field `name` (annotated `kind`) under `rule`, or None."""
    if value is None:
        return None
    note = f" ({rule.note})" if rule.note else ""
    said = f"{name}={shown(value)}"
    if rule.nonempty and not value:
        return f"{said} must not be empty{note}"
    if isinstance(value, Mapping):
        bad = [(k, why) for k in value if rule.keys is not None and (why := rule.keys(str(k)))]
        return f"{name} key {bad[0][0]!r}: {bad[0][1]}" if bad else None
    many = isinstance(value, Sequence) and not isinstance(value, str)
    items = list(value) if many else [value]
    what = f"{_plural(kind)} " if many else ""
    if rule.bound() and not all(rule.holds(v) for v in items):
        return f"{said} must be {what}{rule.bound()}{note}"
    if rule.choices and not all(v in rule.choices for v in items):
        among = "among" if many else "one of"
        return f"{said} must be {among} {', '.join(map(repr, rule.choices))}{note}"
    for text in (v for v in items if isinstance(v, str)):
        if rule.max_bytes is not None and len(text.encode()) > rule.max_bytes:
            return (
                f"{name} {shown(text)} is {len(text.encode())} bytes long: at most "
                f"{rule.max_bytes}{note}"
            )
        if rule.pattern is not None and not re.fullmatch(rule.pattern, text):
            return f"{said} must be {rule.says or 'of the form ' + rule.pattern}{note}"
    return None


def _item_of(kind: str) -> str:
    """The item type of a sequence annotation: "float" of "Sequence[float] | None"."""
    return kind.partition("[")[2].split(",")[0].rstrip("]").strip()


def _plural(kind: str) -> str:
    """How a message names the items of a sequence annotated `kind` ("integers")."""
    found = _KINDS.get(_item_of(kind))
    return found[2] if found else "values"


def shown(value: Any) -> str:
    """`repr(value)`, cut to 60 characters (a 300-character name is not repeated whole)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:45]}…({len(text)} characters)"


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
        checked = _type_check(value, base)
        if checked is not None and not checked[0]:
            what = checked[1] + (" or None" if optional else "")
            out.append(f"{type(obj).__name__}: {f.name}={shown(value)} must be {what}")
    return out


def _type_check(value: Any, base: str) -> tuple[bool, str] | None:
    """(whether `value` is of the annotation `base`, what the annotation takes); None for an
    annotation this check does not read (a record, a Literal, Any)."""
    if base.startswith(_SEQUENCES):
        item = _item_of(base)
        ok = isinstance(value, tuple | list)
        if item in _KINDS:
            accepts, _, several = _KINDS[item]
            return ok and all(accepts(v) for v in value), f"a tuple of {several}"
        return ok, "a tuple"
    if base.startswith(_MAPPINGS):
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value), (
            "a mapping with text keys"
        )
    if base in _KINDS:
        accepts, one, _ = _KINDS[base]
        return accepts(value), one
    return None
