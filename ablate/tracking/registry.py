"""Results stores by URL scheme: each adapter is registered under the schemes it serves, with
what opens a store of them (a factory, or its "module:attribute" name, imported only when a
store of that scheme is opened: registering MLflow does not import it, nor the adapter's modules).

`open_store("jsonl:///abs/folder")` looks up "jsonl"; a scheme with a driver
(`postgresql+psycopg2://`) falls back to its dialect ("postgresql"); a scheme nobody registered
is a one-line `ConfigError` listing those that are.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterable

from ablate.base.errors import ConfigError
from ablate.base.store.port import StudyStore

#: Opens the store at a URI (touching nothing): a callable, or "package.module:attribute".
Opener = Callable[[str], StudyStore] | str

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")


def scheme_of(uri: str) -> str | None:
    """The URI's scheme, lower case (`sqlite` of `sqlite:///x.db`); None when it has none."""
    found = _SCHEME.match(uri)
    return found.group(1).lower() if found else None


class StoreRegistry:
    """URL scheme -> what opens a store of it."""

    def __init__(self) -> None:
        self._openers: dict[str, Opener] = {}

    def register(self, schemes: str | Iterable[str], opener: Opener) -> None:
        """Serve `schemes` (e.g. "jsonl", or ("http", "https")) with `opener`; a scheme
        registered twice is an error."""
        names = [schemes] if isinstance(schemes, str) else list(schemes)
        for scheme in names:
            if scheme != scheme.lower() or not _SCHEME.fullmatch(f"{scheme}:"):
                raise ValueError(f"results stores: {scheme!r} is not a lower-case URL scheme")
            if scheme in self._openers:
                raise ValueError(f"results stores: scheme {scheme!r} is registered twice")
        for scheme in names:
            self._openers[scheme] = opener

    def schemes(self) -> tuple[str, ...]:
        return tuple(sorted(self._openers))

    def opener(self, uri: str) -> Callable[[str], StudyStore]:
        """What opens the store at `uri`; ConfigError for a scheme no adapter serves."""
        scheme = scheme_of(uri)
        found = None
        if scheme is not None:
            found = self._openers.get(scheme) or self._openers.get(scheme.split("+")[0])
        if found is None:
            why = "it has no scheme" if scheme is None else f"no store serves {scheme!r} URIs"
            known = ", ".join(f"{name}://" for name in self.schemes())
            raise ConfigError(f"results store {uri!r}: {why}; the stores serve {known}")
        return _imported(found) if isinstance(found, str) else found

    def open(self, uri: str) -> StudyStore:
        return self.opener(uri)(uri)


def _imported(name: str) -> Callable[[str], StudyStore]:
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)
