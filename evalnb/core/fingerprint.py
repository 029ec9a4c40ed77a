"""What makes two runs' scores comparable (spec README reading 11).

The fingerprint keeps each part's value beside its hash, so that a refused resume can say
exactly what changed: the spec forbids mixing scores produced under different caps,
prompts, decoding, retry policies, judge panels or aggregation policies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalnb.core.errors import FingerprintMismatch
from evalnb.core.jsondiff import as_json, differences, short
from evalnb.core.records import read_json_if_exists, write_json


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def fingerprint(parts: Mapping[str, Any]) -> dict[str, Any]:
    return {"sha256": _digest(dict(parts)), "parts": {k: {"sha256": _digest(v), "value": v}
                                                      for k, v in parts.items()}}


def changed_parts(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    names = set(old["parts"]) | set(new["parts"])
    return sorted(n for n in names
                  if old["parts"].get(n, {}).get("sha256") != new["parts"].get(n, {}).get("sha256"))


CHANGE_LINES = 5   # a refusal names at most this many changed values, then how many more


def change_lines(old: Mapping[str, Any], new: Mapping[str, Any], limit: int = CHANGE_LINES,
                 parts: Sequence[str] | None = None) -> list[str]:
    """One line per changed value, named by its key path inside the part, old -> new
    (``decoding.model.max_tokens: 8192 -> 32768``); past ``limit``, one line saying how many more.
    A part added or removed reads ``<absent>`` on its missing side. ``parts``: only these."""
    found: list[tuple[str, Any, Any]] = []
    for name in changed_parts(old, new) if parts is None else parts:
        before, after = (side["parts"].get(name, {}).get("value", "<absent>") for side in (old, new))
        # A hash-valued part (a prompt's or a file's sha256) changes as a whole.
        found += differences(as_json(before), as_json(after), name, whole_lists=True) or [(name, before, after)]
    lines = [f"{path}: {_value(a)} -> {_value(b)}" for path, a, b in found[:limit]]
    if len(found) > limit:
        lines.append(f"... and {len(found) - limit} more changed value{'s' if len(found) - limit > 1 else ''}")
    return lines


def _value(value: Any) -> str:
    return "<absent>" if value == "<absent>" else short(value)


def check_or_record(path: Path, new: dict[str, Any]) -> None:
    """Record the fingerprint of a new run; refuse to resume into a different one, naming
    each changed value (:func:`change_lines`)."""
    old = read_json_if_exists(path)
    if old is None:
        write_json(path, new)
        return
    if old["sha256"] == new["sha256"]:
        return
    changes = "\n".join(f"  {line}" for line in change_lines(old, new))
    raise FingerprintMismatch(
        f"{path.parent}: refusing to resume, the run was started under a different configuration:\n"
        f"{changes}\nScores from the two would not be comparable: choose a new run_name or output_dir.")
