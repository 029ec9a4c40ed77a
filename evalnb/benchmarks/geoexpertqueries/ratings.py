"""The autorater's reply read: a rating of the likert scale (0, 1 or 2) from a JSON ``rating``
field or a ``Rating: N`` line, mapped through the scale; and how often independent runs of
the autorater disagree. A rating that does not parse is a judge failure: resumable, never a zero.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from evalnb.core.replies import JudgeReplyError, as_number, field_of


_RATING_LINE = re.compile(r"\brating\b\W{0,6}([0-9])\b", re.I)


def parse_rating(reply: str, scale: Mapping[str, float]) -> int:
    """A rating in the scale, from a JSON ``rating`` field or a ``Rating: N`` line."""
    try:
        value, _ = field_of(reply, "rating")
    except JudgeReplyError:
        lines = _RATING_LINE.findall(reply)
        if not lines:
            raise
        value = lines[-1]
    number = as_number(value)
    if number is None or not number.is_integer() or str(int(number)) not in scale:
        raise JudgeReplyError(f"rating {value!r} is not one of {', '.join(scale)}")
    return int(number)


def read_rating(reply: str, scale: Mapping[str, float]) -> tuple[float, dict[str, Any]]:
    """A rating of the scale, mapped through it."""
    rating = parse_rating(reply, scale)
    return scale[str(rating)], {"rating": rating}


def agreement(ratings: Sequence[Sequence[int]]) -> dict[str, Any]:
    """How often independent runs disagree, over queries with every run rated."""
    if not ratings:
        return {"queries": 0, "unanimous_share": None, "max_spread_share": None, "mean_range": None}
    ranges = [max(r) - min(r) for r in ratings]
    return {"queries": len(ratings), "unanimous_share": sum(x == 0 for x in ranges) / len(ranges),
            "max_spread_share": sum(x == 2 for x in ranges) / len(ranges),
            "mean_range": sum(ranges) / len(ranges)}
