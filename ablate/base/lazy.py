"""torch for the modules that declare more than they compute. The factor registries' entries say
which `Algorithm` fields they read, and `Algorithm`'s checks read those declarations: so that
`ablate presets`, `ablate show` and loading a study file do not wait for torch's import (~1.5 s),
the registry modules reach torch through `torch` here, imported at its first use."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class _Torch:
    """The `torch` module, imported when an attribute is first asked for."""

    def __getattr__(self, name: str) -> Any:
        import torch as real

        value = getattr(real, name)
        setattr(self, name, value)  # later lookups find it without coming here
        return value


torch: Any = _Torch()


def no_grad(fn: F) -> F:
    """`@torch.no_grad()` without importing torch to decorate `fn`."""

    @functools.wraps(fn)
    def without_grad(*args: Any, **kwargs: Any) -> Any:
        with torch.no_grad():
            return fn(*args, **kwargs)

    return without_grad  # type: ignore[return-value]
