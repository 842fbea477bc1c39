"""Numbers from outside (a provider's usage, a record's costs): finite and non-negative, or refused.

JSON allows what arithmetic does not: `1e400` parses as infinity, and `NaN` slips through
Python's parser. Every count and amount that enters from a reply or a file passes here once.
"""

from __future__ import annotations

import math
from typing import Any


def count(value: Any, what: str) -> int:
    """A non-negative whole number (an int, or a float with no fraction); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} should be a whole number, not {type(value).__name__}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"{what} should be a whole number, not {value!r}")
    if value < 0:
        raise ValueError(f"{what} should not be negative ({value!r})")
    return int(value)


def amount(value: Any, what: str) -> float:
    """A finite, non-negative amount (US dollars, seconds); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} should be a number, not {type(value).__name__}")
    try:
        number = float(value)
    except OverflowError as exc:  # an int too large for a float
        raise ValueError(f"{what} is out of range") from exc
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{what} should be a finite, non-negative number, not {value!r}")
    return number
