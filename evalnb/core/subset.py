"""A run over part of the data: the first N items (``subset: {limit: N}``) or named ones
(``subset: {items: [ID, ...]}``), to try an endpoint or a prompt before paying for a full run.

The subset is a parameter like any other, so a stage kernel resolving the same parameters
selects the same items. It is part of the run's fingerprint (:func:`fingerprint_part`), so
a subset run can never resume into the full run's directory nor be compared with it
(``evalnb compare`` refuses). ``evalnb run --limit N`` / ``--items ID,...`` set it and give the
run a directory of its own, named by :func:`suffix` (``RUN_NAME-limit5``,
``RUN_NAME-items-1a2b3c4d``).

"The first N" is the data file's order (the order its tasks are listed and called in), which
is deterministic; named items run in the data file's order too, whatever order they are named
in, so ``--items b,a`` and ``--items a,b`` are one run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from evalnb.core.errors import ConfigError

T = TypeVar("T")


def check_subset(value: Any, source: str) -> dict[str, Any] | None:
    """The ``subset`` parameter checked: None, ``{"limit": N}`` or ``{"items": [ids]}``."""
    if value is None:
        return None
    if isinstance(value, Mapping) and set(value) == {"limit"}:
        limit = value["limit"]
        if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1:
            return {"limit": limit}
    if isinstance(value, Mapping) and set(value) == {"items"}:
        items = value["items"]
        if isinstance(items, list) and items and all(isinstance(i, (str, int)) and str(i) for i in items):
            return {"items": sorted({str(i) for i in items})}
    raise ConfigError(f"{source}: subset: expected {{limit: N}} (a positive whole number) or "
                      f"{{items: [ID, ...]}} (one or more item ids), got {value!r}")


def suffix(subset: Mapping[str, Any]) -> str:
    """What a subset run's name and directory end with: ``limit5``, ``items-1a2b3c4d``."""
    if "limit" in subset:
        return f"limit{subset['limit']}"
    digest = hashlib.sha256(json.dumps(sorted(subset["items"])).encode()).hexdigest()[:8]
    return f"items-{digest}"


def select(tasks: Sequence[T], subset: Mapping[str, Any] | None, ids: Sequence[str], source: str) -> list[T]:
    """The tasks a subset keeps, in the data file's order (``ids``: each task's id, in order).
    An id not in the data is refused, naming it: a typo must not shrink a run silently."""
    if not subset:
        return list(tasks)
    if "limit" in subset:
        return list(tasks[: subset["limit"]])
    wanted = set(subset["items"])
    unknown = sorted(wanted - set(ids))
    if unknown:
        shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise ConfigError(f"{source}: subset: item(s) not in the data: {shown}")
    return [task for task, task_id in zip(tasks, ids) if task_id in wanted]


def fingerprint_part(subset: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fingerprint part of a subset run (nothing for a full run, whose fingerprint stays
    what it was before subsets existed)."""
    return {"subset": dict(subset)} if subset else {}
