"""How many of a stage's answers came from the response cache, and when their original
calls were made (the endpoint's date of a reused answer is its original call's)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from evalnb.execution.cache.reuse import CallCache


def reuse_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """``{"answers": n, "first_call": iso, "last_call": iso}`` over the records answered from the
    cache; None when none was."""
    times = sorted(str(r["cache"].get("called_at")) for r in records
                   if isinstance(r.get("cache"), Mapping) and r["cache"].get("hit"))
    if not times:
        return None
    return {"answers": len(times), "first_call": times[0], "last_call": times[-1]}


def summary_line(stage: str, summary: Mapping[str, Any]) -> str:
    first, last = str(summary["first_call"])[:10], str(summary["last_call"])[:10]
    when = first if first == last else f"{first} to {last}"
    noun = "answer" if summary["answers"] == 1 else "answers"
    return f"{stage}: {summary['answers']} {noun} reused from the response cache (original calls {when})"


def cache_lines(cache: CallCache | None, new_records: Iterable[Mapping[str, Any]], stage: str = "") -> list[str]:
    """What a stage says about the cache after its calls: the answers it reused, and any damaged
    entry skipped or failure to read or write the cache."""
    if cache is None:
        return []
    summary = reuse_summary(new_records)
    lines = [summary_line(stage or "stage", summary)] if summary else []
    return lines + cache.report_lines()
