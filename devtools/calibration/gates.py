"""A calibration gate: a simulated rate and the band it must lie in. Each statistic's calibration
module offers `adversarial_gates(studies, seed) -> list[Gate]` on scenarios unlike its default
model; `python -m devtools calibrate --adversarial` runs them all and the test suite runs them at
reduced size, failing on a gate outside its band."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Gate:
    name: str  # what is checked, e.g. "claims: false positives, τ 0.5, 5 seeds"
    value: float  # the simulated rate
    low: float  # the band [low, high] the rate must lie in
    high: float
    studies: int  # simulated studies behind the rate

    @property
    def passed(self) -> bool:
        return self.low <= self.value <= self.high

    def line(self) -> str:
        mark = "ok  " if self.passed else "FAIL"
        return (
            f"{mark} {self.name}: {self.value:.3f} (band [{self.low:.3f}, {self.high:.3f}], "
            f"{self.studies} studies)"
        )


def slack(rate: float, studies: int, z: float = 3.0) -> float:
    """z Monte-Carlo standard errors of a rate near `rate` over `studies` studies: the room a
    reduced-size gate leaves beyond its target so that it fails on a real miss, not on noise."""
    return z * math.sqrt(max(rate * (1 - rate), 1e-4) / max(studies, 1))


def at_most(name: str, value: float, target: float, studies: int) -> Gate:
    """A rate that must not exceed `target` (a false-positive or wrong-verdict rate)."""
    return Gate(name, value, 0.0, target + slack(target, studies), studies)


def at_least(name: str, value: float, target: float, studies: int) -> Gate:
    """A rate that must reach `target` (power, detection)."""
    return Gate(name, value, target - slack(target, studies), 1.0, studies)


def within(name: str, value: float, low: float, high: float, studies: int) -> Gate:
    """A rate that must lie in [low, high] (interval coverage)."""
    return Gate(name, value, low - slack(low, studies), high + slack(high, studies), studies)
