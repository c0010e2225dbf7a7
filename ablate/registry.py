"""One tiny generic registry: a name → function table per factor.

Every function in one registry has the same signature (unlike verl's registries, no special
cases), a duplicate name is rejected at import time, and an unknown name is answered with the
list of valid ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from ablate.errors import ConfigError

F = TypeVar("F", bound=Callable)


class Registry(Generic[F]):
    """Maps names to the functions that implement one factor's values."""

    def __init__(self, factor: str) -> None:
        self.factor = factor
        self._table: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        """Decorator: register `fn` under `name`; a second registration of a name is an error."""

        def add(fn: F) -> F:
            if name in self._table:
                raise ValueError(f"{self.factor}: {name!r} is registered twice")
            self._table[name] = fn
            return fn

        return add

    def get(self, name: str) -> F:
        try:
            return self._table[name]
        except KeyError:
            valid = ", ".join(repr(n) for n in self._table)
            raise ConfigError(f"unknown {self.factor} {name!r}; valid: {valid}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._table)

    def __contains__(self, name: object) -> bool:
        return name in self._table

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)
