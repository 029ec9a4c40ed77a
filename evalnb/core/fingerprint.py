"""What makes two runs' scores comparable (spec README reading 11).

The fingerprint keeps each part's value beside its hash, so that a refused resume can say
exactly what changed: the spec forbids mixing scores produced under different caps,
prompts, decoding, retry policies, judge panels or aggregation policies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from evalnb.core import subset
from evalnb.core.errors import FingerprintMismatch
from evalnb.core.jsondiff import as_json, differences, short
from evalnb.core.run_config import RunConfig
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


# --- what the shared layer puts into every fingerprint, whatever the benchmark returns -------------

SHARED = "shared"
PANEL_SETTINGS = ("reasoning", "send_temperature", "token_param", "strip_think", "approximation")


def shared_parts(config: RunConfig, benchmark: Any) -> dict[str, Any]:
    """The part every run's fingerprint holds under ``"shared"`` (issue 29), set here and never
    by a benchmark (a benchmark's own ``"shared"`` key is replaced): the retry policy; the judge
    panel, each judge's role, provider, model and the settings that change what it replies
    (:data:`PANEL_SETTINGS`); the SHA-256 of each prompt text the benchmark declares
    (``prompts()``); and the SHA-256 of the task set (each item's fields, as JSON). A
    benchmark's ``fingerprint_parts`` adds only its own parts (its contestant, caps, scoring).
    ``prompts()`` is optional (BaseBenchmark's default returns ``PROMPTS``)."""
    declared = getattr(benchmark, "prompts", None)
    prompts: Mapping[str, str] = declared() if callable(declared) else {}
    tasks: Sequence[Any] = benchmark.tasks
    return {SHARED: {
        "retry": asdict(config.retry),
        "judge_panel": [{"role": role, "provider": e.provider, "name": e.name,
                         "settings": {k: getattr(e, k) for k in PANEL_SETTINGS}} for role, e in config.judge_roles()],
        "prompts": {name: hashlib.sha256(text.encode("utf-8")).hexdigest() for name, text in sorted(prompts.items())},
        "tasks": _digest([_fields(t) for t in tasks]),
    }}


def _fields(item: Any) -> Any:
    if is_dataclass(item) and not isinstance(item, type):
        return asdict(item)
    return vars(item) if hasattr(item, "__dict__") else item


def comparable_parts(declared: Sequence[str]) -> tuple[str, ...]:
    """The fingerprint parts that must agree for ``compare``: the benchmark's and the shared part."""
    return (*declared, SHARED)


def run_fingerprint(config: RunConfig, benchmark: Any) -> dict[str, Any]:
    """A run's fingerprint, the one way every command makes it: the benchmark's own parts, the
    shared part (:func:`shared_parts`, which no benchmark can override), the endpoints'
    response settings (``RunConfig.response_parts``) and the subset of the data a run took
    (``evalnb run --limit``, :mod:`evalnb.core.subset`)."""
    parts: dict[str, Any] = dict(benchmark.fingerprint_parts())
    return fingerprint(parts | shared_parts(config, benchmark) | config.response_parts()
                       | subset.fingerprint_part(config.subset))
