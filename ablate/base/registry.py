"""One tiny generic registry: a name → function table per factor.

Every function in one registry has the same signature (unlike verl's registries, no special
cases), a duplicate name is rejected at import time, and an unknown name is answered with the
list of valid ones. Each entry declares the `Algorithm` fields it reads (`reads=`), with the
values it accepts there: the algorithm's checks refuse a field set for an entry that ignores it
and check a read field's range from the declaration, and the peer tables skip unread fields.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

from ablate.base.errors import ConfigError

F = TypeVar("F", bound=Callable)

#: What an entry reads its fields from: an `ablate.factors.algorithms.Algorithm`. Not imported: the
#: algorithm checks itself against these declarations, so the factor modules sit below it.
AlgorithmFields: TypeAlias = Any


def finite(x: Any) -> bool:
    """A real number (not a bool, not NaN or infinite)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class FieldRule:
    """An `Algorithm` field an entry reads and the values it accepts there: `ok(value, algo)`
    false means `{field}={value!r} {must}`; `must` may name other fields as `{algo.name}`."""

    field: str
    ok: Callable[[Any, AlgorithmFields], bool] | None = None
    must: str = ""

    def problem(self, algo: AlgorithmFields) -> str | None:
        value = getattr(algo, self.field)
        if self.ok is None or self.ok(value, algo):
            return None
        return f"{self.field}={value!r} " + self.must.format(algo=algo)


def rules(reads: Iterable[str | FieldRule]) -> tuple[FieldRule, ...]:
    """Field names and rules as rules (a bare name accepts every value)."""
    return tuple(r if isinstance(r, FieldRule) else FieldRule(r) for r in reads)


class Registry(Generic[F]):
    """Maps names to the functions that implement one factor's values."""

    def __init__(self, factor: str) -> None:
        self.factor = factor
        self._table: dict[str, F] = {}
        self._reads: dict[str, tuple[FieldRule, ...]] = {}

    def register(self, name: str, *, reads: Iterable[str | FieldRule] = ()) -> Callable[[F], F]:
        """Decorator: register `fn` under `name`, reading the `Algorithm` fields `reads` (names,
        or `FieldRule`s with the values accepted); a second registration of a name is an error."""
        declared = rules(reads)

        def add(fn: F) -> F:
            if name in self._table:
                raise ValueError(f"{self.factor}: {name!r} is registered twice")
            self._table[name] = fn
            self._reads[name] = declared
            return fn

        return add

    def get(self, name: str) -> F:
        try:
            return self._table[name]
        except KeyError:
            valid = ", ".join(repr(n) for n in self._table)
            raise ConfigError(f"unknown {self.factor} {name!r}; valid: {valid}") from None

    def reads(self, name: str) -> tuple[FieldRule, ...]:
        """The fields entry `name` reads, with the values it accepts."""
        return self._reads[name]

    def fields_read(self) -> tuple[str, ...]:
        """Every field some entry reads, in order of first declaration."""
        return tuple(dict.fromkeys(r.field for rs in self._reads.values() for r in rs))

    def readers(self, field: str) -> tuple[str, ...]:
        """The entries that read `field`."""
        return tuple(n for n, rs in self._reads.items() if any(r.field == field for r in rs))

    def names(self) -> tuple[str, ...]:
        return tuple(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)
