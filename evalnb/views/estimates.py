"""One estimate as every view prints it: ``0.551 [0.325, 0.781]``.

The report, compare, suite leaderboard, terminal summary, exports and paper render all show
an estimate with its interval through :func:`estimate_text`, so one number never reads two
ways. The number of decimals follows the interval's width (enough that the interval's ends
differ in the last shown digit, at least ``decimals``, at most 6): a narrow interval is not
rounded into a point, a wide one is not printed with false precision. The raw numbers stay
in ``scores.json``, ``compare.json`` and the CSV files.
"""

from __future__ import annotations

import math

DEFAULT_DECIMALS = 3
MISSING = "-"


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, (int, float)) and math.isfinite(x)


def decimals_for(low: float | None, high: float | None, decimals: int = DEFAULT_DECIMALS) -> int:
    """Decimals to show an interval ``[low, high]``: ``decimals``, or more when the interval is
    narrower than one unit of the last shown digit (so its ends stay distinct), at most 6."""
    if not (_finite(low) and _finite(high)) or high == low:
        return decimals
    width = abs(float(high) - float(low))   # type: ignore[arg-type]
    needed = max(0, math.ceil(-math.log10(width)))   # first decimal at which the ends can differ
    return max(decimals, min(6, needed))


def number_text(value: float | None, decimals: int = DEFAULT_DECIMALS) -> str:
    """A value with ``decimals`` decimals; a missing or non-finite value as ``-``."""
    return f"{float(value):.{decimals}f}" if _finite(value) else MISSING   # type: ignore[arg-type]


def estimate_text(value: float | None, low: float | None = None, high: float | None = None,
                  decimals: int = DEFAULT_DECIMALS) -> str:
    """``value [low, high]`` with decimals from :func:`decimals_for`; ``value`` alone when the
    interval is missing; ``-`` when the value is."""
    if not _finite(value):
        return MISSING
    places = decimals_for(low, high, decimals)
    if _finite(low) and _finite(high):
        return f"{number_text(value, places)} [{number_text(low, places)}, {number_text(high, places)}]"
    return number_text(value, places)
