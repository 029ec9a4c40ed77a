"""Where two JSON values differ, field by field, for one line per discrepancy.

A path reads like the field it names: ``metrics.all_tasks.ci.low``, ``tasks[wt-07].score``
(list rows that carry an id are named by it, others by their index). Numbers are compared
exactly: a recomputed number goes through the same JSON encoding as the recorded one, so an
unchanged record is equal to the last bit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

ID_FIELDS = ("task_id", "item_id", "key", "id", "case_id", "metric", "stage", "judge", "role")


def as_json(value: Any) -> Any:
    """``value`` as it reads back from a JSON file written by evalnb."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def _label(row: Any, index: int) -> str:
    if isinstance(row, Mapping):
        for name in ID_FIELDS:
            if isinstance(row.get(name), (str, int)) and not isinstance(row.get(name), bool):
                return str(row[name])
    return str(index)


def short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def differences(recorded: Any, expected: Any, path: str = "", *, whole_lists: bool = False) -> list[tuple[str, Any, Any]]:
    """``(path, recorded, expected)`` for every leaf that differs (a missing key is ``<absent>``).
    Lists of different lengths: ``path (length)`` and the two lengths, or with ``whole_lists``
    the two lists themselves."""
    if isinstance(recorded, Mapping) and isinstance(expected, Mapping):
        out = []
        for key in list(expected) + [k for k in recorded if k not in expected]:
            where = f"{path}.{key}" if path else str(key)
            if key not in recorded:
                out.append((where, "<absent>", expected[key]))
            elif key not in expected:
                out.append((where, recorded[key], "<absent>"))
            else:
                out.extend(differences(recorded[key], expected[key], where, whole_lists=whole_lists))
        return out
    if (isinstance(recorded, Sequence) and isinstance(expected, Sequence)
            and not isinstance(recorded, str) and not isinstance(expected, str)):
        if len(recorded) != len(expected):
            return [(path, recorded, expected)] if whole_lists else [(f"{path} (length)", len(recorded), len(expected))]
        out = []
        for i, (a, b) in enumerate(zip(recorded, expected)):
            out.extend(differences(a, b, f"{path}[{_label(b, i)}]", whole_lists=whole_lists))
        return out
    if type(recorded) is not type(expected) and not (
            isinstance(recorded, (int, float)) and isinstance(expected, (int, float))
            and not isinstance(recorded, bool) and not isinstance(expected, bool)):
        return [(path, recorded, expected)]
    return [] if recorded == expected or (recorded != recorded and expected != expected) else [(path, recorded, expected)]


def difference_lines(name: str, recorded: Any, expected: Any, *, limit: int = 20) -> list[str]:
    """One line per differing field, ``name: path: recorded X, recomputed Y``; past ``limit``
    lines, one line saying how many more."""
    found = differences(recorded, expected)
    lines = [f"{name}: {path or '(whole file)'}: recorded {short(a)}, recomputed {short(b)}" for path, a, b in found[:limit]]
    if len(found) > limit:
        lines.append(f"{name}: {len(found) - limit} more fields differ")
    return lines
