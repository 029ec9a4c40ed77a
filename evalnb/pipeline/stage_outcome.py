"""The one line a stage prints about what it did: everything already recorded and no call
made, or how many records it found and how many it made, by status.

A stage has one call per record it needs (an answer per task, a judgement per answer and
judge). A call is *already recorded* when its latest stored record is final; every other
call is run once per pass and leaves exactly one new record, except, in batch mode, calls
still in a batch in flight at the end of the pass. So the counts follow from the stage's
size, its new records and what is in flight, without reading the store again.
"""

from __future__ import annotations

from collections.abc import Mapping

NOUNS = {"generate": ("answer", "answers"), "judge": ("judgement", "judgements")}


def outcome_line(stage: str, calls: int, new: Mapping[str, int], in_flight: int = 0) -> str:
    """``generate: all 12 answers already recorded; no call made``, or
    ``judge: 20 of 30 judgements already recorded; 10 made now (9 ok, 1 failed_transient)``."""
    one, many = NOUNS.get(stage, ("record", "records"))
    unsent = new.get("not_sent", 0)   # held back (the spending ceiling, a stopped endpoint): no record
    new = {status: n for status, n in new.items() if status != "not_sent"}
    made = sum(new.values())
    before = max(0, calls - made - in_flight - unsent)
    noun = one if calls == 1 else many
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(new.items(), key=lambda kv: (-kv[1], kv[0])))
    waiting = (f"; {in_flight} in batches in flight" if in_flight else "") + (f"; {unsent} not sent" if unsent else "")
    if calls == 0:
        return f"{stage}: no {noun} to make"
    if made == 0:
        if before == calls:
            return f"{stage}: all {calls} {noun} already recorded; no call made"
        return f"{stage}: {before} of {calls} {noun} already recorded; none made now{waiting}"
    if before == 0:
        of = "" if made == calls else f" of {calls}"
        return f"{stage}: {made}{of} {noun} made ({statuses}){waiting}"
    return f"{stage}: {before} of {calls} {noun} already recorded; {made} made now ({statuses}){waiting}"
