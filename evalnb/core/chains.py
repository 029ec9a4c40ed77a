"""Chained calls: a call that needs other calls' answers (turn 2 of a conversation sends the
model's own turn-1 answer back as an assistant turn).

A benchmark declares the dependency instead of reading the run's store itself: its
``generation_calls()`` lists every call, and a dependent one is made with :func:`chained`,
naming the keys it needs and a function that prepares it from their records. The stage then
runs the calls in rounds (:func:`ready_calls`): first every call whose needs are done, then,
once their records are stored, the calls those unlock, until a round unlocks nothing; all in
one pass, whatever the concurrency or the subset. A call whose need failed stays pending and
is never sent without it; a rerun picks the chain up where it stopped, since the records are
the only state. ``evalnb estimate`` and ``evalnb prompt`` never call a dependent call's
``prepare`` on what is not there: they prepare it from placeholder records (:func:`preview`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from evalnb.core.errors import NotYet
from evalnb.core.types import Call, Completion, Prepared, Record, answer_fields


def chained(key: str, endpoint: str, needs: Sequence[str], prepare_after: Callable[[Mapping[str, Record]], Prepared],
            interpret: Callable[[Completion], dict[str, object]] = answer_fields) -> Call:
    """A call made once the calls ``needs`` (keys of the same stage) are done:
    ``prepare_after(records)`` gets their records, key -> record."""
    if not needs:
        raise ValueError(f"chained call {key!r}: needs no call; make it a plain Call")
    return Call(key, endpoint, functools.partial(_not_yet, key, tuple(needs)), interpret,  # type: ignore[arg-type]
                needs=tuple(needs), prepare_after=prepare_after)


def _not_yet(key: str, needs: tuple[str, ...]) -> Prepared:
    raise NotYet(f"call {key!r} needs the answers of {', '.join(needs)} first")


def bound(call: Call, records: Mapping[str, Record]) -> Call:
    """``call`` with its needs' records given: an ordinary call (a plain call as it is)."""
    if not call.needs or call.prepare_after is None:
        return call
    given = {k: records[k] for k in call.needs}
    return replace(call, prepare=functools.partial(call.prepare_after, given))


def ready_calls(calls: Sequence[Call], records: Mapping[str, Record],
                done: Callable[[Record], bool]) -> tuple[list[Call], list[Call]]:
    """``calls`` split into those that can be made now (bound to their needs' records) and
    those that still wait for a need that is not done."""
    ready, waiting = [], []
    for call in calls:
        if all(k in records and done(records[k]) for k in call.needs):
            ready.append(bound(call, records))
        else:
            waiting.append(call)
    return ready, waiting


def preview(call: Call, records: Mapping[str, Record], placeholder: Callable[[str], Record]) -> tuple[Call, list[str]]:
    """``call`` bound to its needs' records where they are recorded and to ``placeholder(key)``
    where not, and the keys it still awaits: what ``estimate`` and ``prompt`` show of a chained
    call before its needs are answered."""
    if not call.needs:
        return call, []
    missing = [k for k in call.needs if k not in records]
    return bound(call, {**{k: placeholder(k) for k in missing}, **records}), missing
