"""A clock a test advances itself, for code that takes a clock (leases, a task's verifier time
limit): the test states the time that passes instead of sleeping through it."""

from __future__ import annotations


class ManualClock:
    """Callable like `time.monotonic`: returns `now`, which moves only by `advance`."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"a clock does not go back ({seconds} s)")
        self.now += seconds
        return self.now
