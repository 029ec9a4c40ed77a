"""A WildTrace judge's reply read: its total, normalised by the rubric's points (the clamp to
[0, 1] recorded), and the per-item points it lists, where it lists them as numbers.

A reply whose ``total`` is not a number is a judge failure (:class:`JudgeReplyError`):
resumable, never a zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalnb.core.replies import JudgeReplyError, as_number, field_of, is_json_number


def read_verdict(reply: str, max_points: float) -> tuple[float, dict[str, Any]]:
    """The total, normalised by the rubric's points, with the clamp recorded."""
    total = parse_total(reply)
    verdict = normalise(total, max_points)
    return verdict.score, {"total": total, "clamped": verdict.clamped}


def parse_total(reply: str) -> float:
    value, _ = field_of(reply, "total")
    number = as_number(value)
    if number is None:
        raise JudgeReplyError(f"'total' is not a number: {value!r}")
    return number


def points_awarded(reply: str | None) -> list[float] | None:
    """The judge's per-item points, when its reply lists them as numbers; else None."""
    try:
        value, _ = field_of(reply or "", "points_awarded")
    except JudgeReplyError:
        return None
    if not isinstance(value, list) or not all(is_json_number(v) for v in value):
        return None
    numbers = [as_number(v) for v in value]
    return None if any(n is None for n in numbers) else [float(n or 0.0) for n in numbers]


@dataclass(frozen=True)
class Normalised:
    score: float
    clamped: bool


def normalise(total: float, max_points: float) -> Normalised:
    raw = total / max_points
    score = min(1.0, max(0.0, raw))
    return Normalised(score, clamped=score != raw)
