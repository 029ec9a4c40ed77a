"""What makes two runs' scores comparable (spec README reading 11).

The fingerprint keeps each part's value beside its hash, so that a refused resume can say
exactly what changed: the spec forbids mixing scores produced under different caps,
prompts, decoding, retry policies, judge panels or aggregation policies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalnb.core.errors import FingerprintMismatch
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


def short_json(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 160 else text[:157] + "..."


def check_or_record(path: Path, new: dict[str, Any]) -> None:
    """Record the fingerprint of a new run; refuse to resume into a different one."""
    old = read_json_if_exists(path)
    if old is None:
        write_json(path, new)
        return
    if old["sha256"] == new["sha256"]:
        return
    details = "; ".join(f"{n}: {short_json(old['parts'].get(n, {}).get('value'))} -> "
                        f"{short_json(new['parts'].get(n, {}).get('value'))}"
                        for n in changed_parts(old, new))
    raise FingerprintMismatch(
        f"{path.parent}: refusing to resume, the run was started under a different "
        f"configuration ({details}). Scores from the two would not be comparable: choose a "
        "new run_name or output_dir.")
