"""Reading judge replies (spec README readings 8 and 9).

A reply without a parsable ``total`` is a judge failure: infrastructure, resumable, never
a zero. Normalised scores are clamped to [0, 1] and the clamp is recorded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class JudgeReplyError(ValueError):
    """The reply holds no usable verdict; the judge call is to be made again."""


_decoder = json.JSONDecoder()


def embedded_json(text: str, opener: str) -> list[Any]:
    """Every top-level JSON value that starts with ``opener`` (``{`` or ``[``) in ``text``,
    left to right; prose and code fences around them are ignored."""
    found, i = [], text.find(opener)
    while i != -1:
        try:
            value, end = _decoder.raw_decode(text, i)
        except (ValueError, RecursionError):   # not JSON; or a 4300-digit integer, or deep nesting
            i = text.find(opener, i + 1)
            continue
        found.append(value)
        i = text.find(opener, end)
    return found


def json_objects(text: str) -> list[dict[str, Any]]:
    return embedded_json(text, "{")


def as_number(value: Any) -> float | None:
    """A JSON number, or a string holding only one (judges sometimes quote it)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def field_of(reply: str, name: str) -> tuple[Any, dict[str, Any]]:
    """The first JSON object in ``reply`` that has ``name``, and that field's value."""
    for obj in json_objects(reply):
        if name in obj:
            return obj[name], obj
    raise JudgeReplyError(f"no JSON object with {name!r} in the judge reply")


def parse_total(reply: str) -> float:
    value, _ = field_of(reply, "total")
    number = as_number(value)
    if number is None:
        raise JudgeReplyError(f"'total' is not a number: {value!r}")
    return number


@dataclass(frozen=True)
class Normalised:
    score: float
    clamped: bool


def normalise(total: float, max_points: float) -> Normalised:
    raw = total / max_points
    score = min(1.0, max(0.0, raw))
    return Normalised(score, clamped=score != raw)


def panel_mean(scores: Sequence[float | None]) -> float | None:
    """Reading 9: a task's score exists only when every configured judge has one."""
    if not scores or any(s is None for s in scores):
        return None
    return sum(scores) / len(scores)  # type: ignore[arg-type]
