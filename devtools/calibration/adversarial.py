"""`python -m devtools calibrate --adversarial`: every statistic's calibration on scenarios unlike
the model it was tuned on, as gates.

Each calibration module below offers `adversarial_gates(studies, seed) -> list[Gate]`: Beta-mixture
problem difficulties instead of logit-normal ones, low-rank or heavy-tailed seed effects, an arm ×
problem interaction up to 1 logit, divergence in one arm, curves that drift linearly in log
compute or rise in two phases. A gate is a simulated rate and the band it must lie in, with
Monte-Carlo slack for the study count (`gates.slack`), so the same gates run at full size here and
at reduced size in the test suite (tests/test_calibration_adversarial.py), where a gate outside
its band fails `make test`.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Sequence

from devtools.calibration.gates import Gate

#: The modules with adversarial gates, in report order: (title, module).
SUITES: tuple[tuple[str, str], ...] = (
    ("claims and findings", "devtools.calibration.claims_adversarial"),
    ("ablate plan", "devtools.calibration.plan_calibration"),
    ("sequential design", "devtools.calibration.sequential_task"),
    ("divergence", "devtools.calibration.divergence"),
    ("compute curves", "devtools.calibration.curve_calibration"),
)


def run(
    studies: int, seed: int = 0, suites: Sequence[str] | None = None
) -> list[tuple[str, list[Gate], float]]:
    """(title, gates, seconds) of every suite (or those named in `suites`)."""
    out = []
    for title, module in SUITES:
        if suites is not None and title not in suites:
            continue
        start = time.perf_counter()
        gates = importlib.import_module(module).adversarial_gates(studies, seed)
        out.append((title, gates, time.perf_counter() - start))
    return out


def format_report(results: list[tuple[str, list[Gate], float]]) -> str:
    lines = []
    for title, gates, seconds in results:
        lines.append(f"{title} ({seconds:.0f} s):")
        lines += ["  " + g.line() for g in gates]
    failed = sum(not g.passed for _, gates, _ in results for g in gates)
    total = sum(len(gates) for _, gates, _ in results)
    lines.append(f"{total - failed} of {total} gates pass")
    return "\n".join(lines)
