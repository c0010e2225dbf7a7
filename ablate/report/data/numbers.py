"""The report's one number style, used by every table cell and every sentence:

- an estimate with an interval shows as many decimals as the interval's width needs (two
  significant digits of the width), its ends and value alike;
- a number alone shows three significant digits (at least the integer part), thousands
  grouped with commas (`60,000`), never in scientific notation;
- a minus sign is the true minus `−` (U+2212; LaTeX writes it `$-$`);
- a p-value shows two significant digits, floored at `< 1e-6` (no test on a few dozen problems
  supports a smaller one).
"""

from __future__ import annotations

import math

MINUS = "−"
#: The smallest p-value the report prints; anything smaller reads `< 1e-6`.
P_FLOOR = 1e-6
#: No number is shown with more decimals than this (a smaller one reads 0, its sign kept).
MAX_DECIMALS = 7


def _minus(text: str) -> str:
    return text.replace("-", MINUS)


def decimals_for_width(width: float) -> int:
    """Decimals that show two significant digits of an interval `width` wide (0 to
    `MAX_DECIMALS`; 3 for a width of zero or none)."""
    if not math.isfinite(width) or width <= 0:
        return 3
    return min(MAX_DECIMALS, max(0, 1 - math.floor(math.log10(width))))


def _decimals(x: float, significant: int = 3) -> int:
    if x == 0:
        return significant
    return min(MAX_DECIMALS, max(0, significant - 1 - math.floor(math.log10(abs(x)))))


def fixed(x: float, decimals: int, sign: bool = False) -> str:
    """`x` with `decimals` decimals, thousands grouped, true minus (`sign`: `+` on positives)."""
    if not math.isfinite(x):
        return "–"
    if round(x, decimals) == 0:  # −0.0003 at 3 decimals is 0.000, not "−0.000"
        return f"{0:.{decimals}f}"
    text = f"{x:{'+' if sign else ''},.{decimals}f}"
    return _minus(text)


def num(x: float | None, sign: bool = False) -> str:
    """A number alone: three decimals below 1 (a rate, a Δ), three significant digits above
    (all integer digits, thousands grouped), two significant digits below 0.001."""
    if x is None or not math.isfinite(float(x)):
        return "–"
    x = float(x)
    if x != 0 and abs(x) < 0.001:
        return fixed(x, _decimals(x, 2), sign)
    return fixed(x, _decimals(x) if abs(x) >= 1 else 3, sign)


def rate(x: float, sign: bool = False) -> str:
    """A declared setting as written in a study file (`3e-5`, `0.001`, `−0.25`)."""
    text = f"{x:{'+' if sign else ''}g}".replace("e-0", "e-").replace("e+0", "e+")
    return MINUS + text[1:] if text.startswith("-") else text


def integer(n: float) -> str:
    """A count, thousands grouped (`60,000`)."""
    if not math.isfinite(float(n)):
        return "–"
    return _minus(f"{round(n):,}")


def estimate(
    value: float, low: float, high: float, sign: bool = False, floor: float | None = None
) -> str:
    """`value [low, high]`, decimals by the interval's width; `floor`: the least the quantity
    can be (a variance: 0), the interval's ends clipped to it."""
    if floor is not None:
        low, high = max(low, floor), max(high, floor)
    if not (math.isfinite(low) and math.isfinite(high)):
        return num(value, sign)
    d = decimals_for_width(high - low)
    return f"{fixed(value, d, sign)} [{fixed(low, d, sign)}, {fixed(high, d, sign)}]"


def p_value(p: float | None) -> str:
    """A p-value: two significant digits, `< 1e-6` below the floor."""
    if p is None or not math.isfinite(float(p)):
        return "–"
    p = float(p)
    if p < P_FLOOR:
        return f"< {P_FLOOR:.0e}".replace("e-0", "e-")
    return fixed(p, _decimals(p, 2))


def is_p_column(name: str) -> bool:
    """A column of p-values, by its name (`p`, `p (Holm)`, `p exact`, `p_holm`...)."""
    return name == "p" or name.startswith(("p ", "p_"))


def is_variance_column(name: str) -> bool:
    """A column of variances or SDs (never below 0: their intervals are clipped there)."""
    words = name.lower().replace("-", " ").split()
    return any(w in ("var", "variance", "sd", "se") for w in words)
