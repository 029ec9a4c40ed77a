"""Judge replies: every parser, and the one helper that turns a completion into a verdict.

A reply without a usable verdict is a judge failure: infrastructure, resumable, never a
zero. :func:`verdict_of` is the only place that says so: a completion
that is not ``ok`` becomes ``judge_{status}``, a reply its benchmark's parser refuses
becomes ``failed_parse``, and anything else is an ``ok`` verdict with its score. Each
benchmark supplies only its parser.

Each benchmark's parser lives with its protocol and raises :class:`JudgeReplyError` on a
reply without a verdict; what they share is here: the JSON object or field in a reply
(:func:`json_objects`, :func:`field_of`) and numbers as JSON means them (:func:`as_number`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from evalnb.core.types import Completion, JudgeStatus

_PLAIN_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_decoder = json.JSONDecoder()


class JudgeReplyError(ValueError):
    """The reply holds no usable verdict; the judge call is to be made again."""


# --- numbers and embedded JSON ------------------------------------------------------------------

def is_json_number(value: Any) -> bool:
    """A JSON number: an int or float, never a boolean."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_number(value: Any) -> float | None:
    """A finite number: a JSON number, or a string holding only a plain decimal number
    (``"42"``, ``" -1.5e3 "``; not ``"nan"``, ``"1,000"``, ``"1_000"`` or ``"42 km"``); else None.

    The one reading of "a number" for judge replies (judges sometimes quote it) and for
    answer elements (the deterministic scorer's numeric strings on the prediction side).
    """
    if is_json_number(value):
        try:
            number = float(value)
        except OverflowError:   # an integer beyond float range
            return None
    elif isinstance(value, str) and _PLAIN_NUMBER.fullmatch(value.strip()):
        number = float(value.strip())
    else:
        return None
    return number if math.isfinite(number) else None


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
    """Every top-level JSON object in ``text``, left to right (prose and code fences ignored)."""
    return embedded_json(text, "{")


def field_of(reply: str, name: str) -> tuple[Any, dict[str, Any]]:
    """The first JSON object in ``reply`` that has ``name``, and that field's value."""
    for obj in json_objects(reply):
        if name in obj:
            return obj[name], obj
    raise JudgeReplyError(f"no JSON object with {name!r} in the judge reply")


# --- a completion as a verdict --------------------------------------------------------------------

Parse = Callable[[str], tuple[float, Mapping[str, Any]]]
"""A benchmark's reading of a reply: ``(score, detail)``, or JudgeReplyError."""


@dataclass(frozen=True)
class Verdict:
    """One judge call's outcome: ``ok`` with a score in [0, 1], or a resumable failure."""

    status: str
    reply: str | None
    score: float | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)   # total, clamped, rating, element_scores...
    error: Mapping[str, Any] | None = None

    def fields(self) -> dict[str, Any]:
        """The stored record's fields (the reply as ``text``, like every completion)."""
        return {"status": self.status, "text": self.reply, "score": self.score, **self.detail,
                **({"error": dict(self.error)} if self.error else {})}


def verdict_of(completion: Completion, parse: Parse, *, who: str = "judge") -> Verdict:
    """The one place a completion becomes a verdict or a judge failure (never a zero)."""
    if completion.status != "ok":
        return Verdict(f"judge_{completion.status}", completion.text,
                       error={"kind": "judge", "message": f"{who} reply was {completion.status}"})
    try:
        score, detail = parse(completion.text)
    except JudgeReplyError as e:
        return Verdict(JudgeStatus.FAILED_PARSE.value, completion.text,
                       error={"kind": "parse", "message": str(e)})
    return Verdict(JudgeStatus.OK.value, completion.text, score, detail)


def _interpret(parse: Parse, who: str, completion: Completion) -> dict[str, Any]:
    return verdict_of(completion, parse, who=who).fields()


def interpreter(parse: Parse, *, who: str = "judge") -> Callable[[Completion], dict[str, Any]]:
    """A :class:`~evalnb.core.types.Call`'s ``interpret``: the completion's verdict as record fields."""
    return partial(_interpret, parse, who)


def reply_of(record: Mapping[str, Any] | None) -> str | None:
    """A stored judge record's reply (records written before the judge reply was called
    ``text`` everywhere kept it as ``judge_reply``)."""
    if not record:
        return None
    return record.get("text", record.get("judge_reply"))
