"""What a benchmark returns is checked where it returns it.

A benchmark's ``prepare`` may return a final record (``Prepared(None, fields)``) and its
``interpret`` turns a completion into a record's fields. Either may be wrong in a benchmark
of one's own (a record without ``status``, an unknown status, an ``ok`` without its text).
:func:`checked_calls` wraps a stage's calls so that such a record fails its own call, with a
message naming the benchmark, the call (its item) and the field, and never reaches the
store: the runner records the call as a resumable failure (``failed_transient``, error code
``unexpected``), every other call of the stage goes on, and once the benchmark is fixed the
same command makes that call again. Nothing a bad record holds is ever scored.

The rule a record must follow (:func:`record_problem`):

- ``status`` is a string, one of the stage's known statuses: the benchmark's ``STATUSES``
  and the shared ones (:class:`~evalnb.core.types.Status` for the generate stage,
  :class:`~evalnb.core.types.JudgeStatus` for the judge stage);
- from an interpreter (a completion's record), ``text`` is present: a string (the
  completion's text), or None; in an ``ok`` record, a string;
- from a preparation (a record decided without a call: out of context, read from a file,
  scored by rule), ``text`` may be absent; where present it is a string or None.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evalnb.core.types import Call, Completion, JudgeStatus, Prepared, Status

SHARED_STATUSES = {"generate": tuple(s.value for s in Status), "judge": tuple(s.value for s in JudgeStatus)}
SHARED_STATUSES["judge_retest"] = SHARED_STATUSES["judge"]   # the retest study re-makes judge calls


class InvalidRecord(ValueError):
    """A benchmark returned a record that breaks the record rule (the message says which field)."""


def record_problem(record: Mapping[str, Any], statuses: Iterable[str], *, completion: bool = True) -> str | None:
    """What is wrong with ``record`` (``"no 'status'"`` ...), or None when it follows the rule;
    ``completion``: the record was read from a completion (an interpreter's), so it has a text."""
    known = tuple(dict.fromkeys(statuses))
    if not isinstance(record, Mapping):
        return f"expected a mapping of fields, got {type(record).__name__}"
    if "status" not in record:
        return f"no 'status' (one of {', '.join(known)})"
    status = record["status"]
    if not isinstance(status, str) or status not in known:
        return f"'status' is {status!r}, not one of {', '.join(known)}"
    if "text" not in record:
        return "no 'text' (the completion's text, or None)" if completion else None
    if record["text"] is not None and not isinstance(record["text"], str):
        return f"'text' is a {type(record['text']).__name__}, expected a string or None"
    if completion and status == "ok" and record["text"] is None:
        return "'text' is None in an 'ok' record"
    return None


def known_statuses(stage: str, declared: Sequence[str]) -> tuple[str, ...]:
    """The statuses a record of ``stage`` may carry: the shared ones and the benchmark's own."""
    return tuple(dict.fromkeys((*SHARED_STATUSES[stage], *declared)))


def checked_calls(calls: Sequence[Call], benchmark: str, stage: str, declared: Sequence[str]) -> list[Call]:
    """``calls`` whose final records are checked (:func:`record_problem`) as they are returned:
    a bad one raises :class:`InvalidRecord` inside its own call. Every other field of the call
    (its sample, whether it is cached, what it needs) is kept as it is."""
    statuses = known_statuses(stage, declared)
    return [dataclasses.replace(c, prepare=functools.partial(_prepare, c, benchmark, stage, statuses),
                                interpret=functools.partial(_interpret, c, benchmark, stage, statuses))
            for c in calls]


def _fail(call: Call, benchmark: str, stage: str, what: str, problem: str) -> InvalidRecord:
    return InvalidRecord(f"benchmark {benchmark}: {stage} call {call.key!r}: the record its {what} returned "
                         f"has {problem}" if problem.startswith("no ") else
                         f"benchmark {benchmark}: {stage} call {call.key!r}: the record its {what} returned: "
                         f"{problem}")


def _prepare(call: Call, benchmark: str, stage: str, statuses: tuple[str, ...]) -> Prepared:
    prepared = call.prepare()
    if not isinstance(prepared, Prepared):
        raise InvalidRecord(f"benchmark {benchmark}: {stage} call {call.key!r}: prepare returned a "
                            f"{type(prepared).__name__}, expected Prepared(request, fields)")
    if prepared.request is None and (problem := record_problem(prepared.fields, statuses, completion=False)):
        raise _fail(call, benchmark, stage, "preparation", problem)
    return prepared


def _interpret(call: Call, benchmark: str, stage: str, statuses: tuple[str, ...],
               completion: Completion) -> dict[str, Any]:
    fields = call.interpret(completion)
    if problem := record_problem(fields, statuses):
        raise _fail(call, benchmark, stage, "interpreter", problem)
    return fields


def stored_record_problem(record: Mapping[str, Any]) -> str | None:
    """What makes a stored line unreadable as a record (a string ``status``); the store's own
    check on lines an older version (or a since-fixed benchmark) wrote."""
    status = record.get("status")
    if not isinstance(status, str):
        return "no 'status'" if "status" not in record else f"'status' is {status!r}, not a string"
    return None
