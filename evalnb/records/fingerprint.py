"""What makes two runs' scores comparable.

The fingerprint keeps each part's value beside its hash, so that a refused resume can say
exactly what changed: the protocols forbid mixing scores produced under different caps,
prompts, decoding, retry policies, judge panels or aggregation policies.

Each of these is fingerprinted in one place. The retry policy, the judge panel, the prompt
texts and the task set are the shared part's (:func:`shared_parts`), whatever the benchmark;
a benchmark's own parts (``fingerprint_parts``) hold the rest. A fingerprint is read thing by
thing (:func:`readings`): the benchmark's parts and each key of the shared part, so a changed
panel is one thing, named once, wherever it was recorded.

Records made before this was so (evalnb's own benchmarks also kept ``retry``, ``tasks``,
``judge_panel`` and ``prompts`` parts of their own, the judge's model or a prompt's hash
inside a part, and ``strip_think`` listed the judges that set it) are read past those
duplicates when they hold a shared part: such a run resumes, keeping its
``fingerprint.json`` as it was written (:func:`in_force`). A record with no shared part at
all is refused, naming ``shared`` (docs/operations.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from evalnb.core import subset
from evalnb.core.errors import FingerprintMismatch
from evalnb.core.jsondiff import as_json, differences, short
from evalnb.core.run_config import RunConfig
from evalnb.records.stores import read_json_if_exists, write_json

SHARED = "shared"
SHARED_KEYS = ("retry", "judge_panel", "prompts", "tasks")   # what :func:`shared_parts` holds under SHARED
ABSENT = "<absent>"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def fingerprint(parts: Mapping[str, Any]) -> dict[str, Any]:
    return {"sha256": _digest(dict(parts)), "parts": {k: {"sha256": _digest(v), "value": v}
                                                      for k, v in parts.items()}}


# --- reading a fingerprint thing by thing --------------------------------------------------------

def moved_to_shared(benchmark: Any) -> tuple[str, ...]:
    """The key paths inside a benchmark's own parts that the shared part holds (the judge's
    model inside a scoring part): left out of its fingerprint, read past in its older records
    (``BaseBenchmark.MOVED_TO_SHARED``; none unless declared)."""
    return tuple(getattr(benchmark, "MOVED_TO_SHARED", ()))


def readings(fp: Mapping[str, Any], moved: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """What ``fp`` records, thing by thing (name -> ``{"sha256", "value"}``): the benchmark's
    own parts, and each key of the shared part as a thing of its own (``tasks``,
    ``judge_panel`` ...). Beside a shared part, an older record's duplicates are read past: a
    part named like one of its keys, the key paths ``moved`` names (``scoring.model``) and the
    judges' roles in ``strip_think`` (the panel's settings hold them)."""
    parts = dict(fp.get("parts") or {})
    shared = parts.pop(SHARED, None)
    if shared is None:   # a record from before the shared part: read as it was written
        return parts
    for name in SHARED_KEYS:
        parts.pop(name, None)
    values = {name: part.get("value") for name, part in parts.items()}
    for name, value in _left_out(values, moved).items():
        if value != values[name]:
            parts[name] = {"sha256": _digest(value), "value": value}
    # A judge's strip_think is the panel's (its settings): older records listed its role here too.
    if "strip_think" in parts and (roles := parts["strip_think"].get("value")) != ["model"]:
        if isinstance(roles, list) and "model" in roles:
            parts["strip_think"] = {"sha256": _digest(["model"]), "value": ["model"]}
        elif isinstance(roles, list):
            del parts["strip_think"]
    for key, value in (shared.get("value") or {}).items():
        parts[key] = {"sha256": _digest(value), "value": value}
    return parts


def _left_out(parts: Mapping[str, Any], moved: Sequence[str]) -> dict[str, Any]:
    """``parts`` (name -> value) without the key paths ``moved`` names (``scoring.model``)."""
    out = dict(parts)
    for path in moved:
        name, *keys = path.split(".")
        if keys and name in out:
            out[name] = _without(out[name], keys)
    return out


def _without(value: Any, keys: Sequence[str]) -> Any:
    if not isinstance(value, Mapping) or keys[0] not in value:
        return value
    return {k: (_without(v, keys[1:]) if k == keys[0] and len(keys) > 1 else v)
            for k, v in value.items() if not (k == keys[0] and len(keys) == 1)}


def _one_sided(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (SHARED in (a.get("parts") or {})) != (SHARED in (b.get("parts") or {}))


def thing_names(names: Sequence[str]) -> list[str]:
    """``names`` with ``shared`` standing for its keys, each once."""
    out: dict[str, None] = {}
    for name in names:
        out.update(dict.fromkeys(SHARED_KEYS if name == SHARED else (name,)))
    return list(out)


def differing(a: Mapping[str, Any], b: Mapping[str, Any], names: Sequence[str] | None = None,
              moved: Sequence[str] = ()) -> list[str]:
    """The things (:func:`readings`) whose hashes differ between two fingerprints, each once:
    all of them, or those ``names`` gives (``shared`` stands for its keys). A record with no
    shared part against one with it differs in ``shared`` alone, when everything (or
    ``shared``) is asked: the two were not made by one rule."""
    if _one_sided(a, b) and (names is None or SHARED in names):
        return [SHARED]
    ra, rb = readings(a, moved), readings(b, moved)
    wanted = sorted(set(ra) | set(rb)) if names is None else thing_names(names)
    return [n for n in wanted if ra.get(n, {}).get("sha256") != rb.get(n, {}).get("sha256")]


# --- saying what changed ---------------------------------------------------------------------

CHANGE_LINES = 5   # a refusal names at most this many changed values, then how many more
# What a hash stands for, by the thing it is under; other hashes read "changed".
HASHED = {"tasks": "the task set changed", "prompts": "the prompt text changed"}
_SHA = re.compile(r"[0-9a-f]{64}")


def change_lines(old: Mapping[str, Any], new: Mapping[str, Any], limit: int = CHANGE_LINES,
                 parts: Sequence[str] | None = None, moved: Sequence[str] = ()) -> list[str]:
    """One line per changed value, named by its key path inside the thing it belongs to, old ->
    new (``decoding.model.max_tokens: 8192 -> 32768``, ``judge_panel[judge2].name: "a" -> "b"``);
    a hash says what it stands for (``tasks: the task set changed (sha256 3f2a1b2c4d5e ->
    9b1c2d3e4f5a)``); past ``limit``, one line saying how many more. A value added or removed
    reads ``<absent>`` on its missing side. ``parts``: only these things."""
    names = differing(old, new, parts, moved)
    if names == [SHARED] and _one_sided(old, new):
        listed = ", ".join(SHARED_KEYS)
        before, after = (listed, ABSENT) if SHARED in (old.get("parts") or {}) else (ABSENT, listed)
        return [f"{SHARED}: {before} -> {after} (a record made before evalnb kept these in one shared part)"]
    ro, rn = readings(old, moved), readings(new, moved)
    found: list[tuple[str, Any, Any]] = []
    for name in names:
        before, after = (side.get(name, {}).get("value", ABSENT) for side in (ro, rn))
        # A hash-valued thing (a prompt's or a file's sha256) changes as a whole.
        found += differences(as_json(before), as_json(after), name, whole_lists=True) or [(name, before, after)]
    lines = [_line(path, a, b) for path, a, b in found[:limit]]
    if len(found) > limit:
        lines.append(f"... and {len(found) - limit} more changed value{'s' if len(found) - limit > 1 else ''}")
    return lines


def _line(path: str, before: Any, after: Any) -> str:
    if all(isinstance(v, str) and _SHA.fullmatch(v) for v in (before, after)):
        what = HASHED.get(re.split(r"[.\[]", path, maxsplit=1)[0], "changed")
        return f"{path}: {what} (sha256 {before[:12]} -> {after[:12]})"
    return f"{path}: {_value(before)} -> {_value(after)}"


def _value(value: Any) -> str:
    return ABSENT if value == ABSENT else short(value)


# --- resuming ------------------------------------------------------------------------------------

def in_force(recorded: Mapping[str, Any] | None, new: dict[str, Any], moved: Sequence[str] = ()) -> dict[str, Any]:
    """The fingerprint a run goes on under: the one it recorded when ``new`` says the same,
    thing by thing (an older record's duplicates read past), so ``fingerprint.json`` and every
    file that quotes it stay as they were; else ``new``."""
    if recorded is not None and (recorded.get("sha256") == new["sha256"] or not differing(recorded, new, moved=moved)):
        return dict(recorded)
    return new


def check_or_record(path: Path, new: dict[str, Any], moved: Sequence[str] = (), *,
                    record: bool = True) -> dict[str, Any]:
    """Record the fingerprint of a new run; refuse to resume into a different one, naming
    each changed value (:func:`change_lines`). Returns the fingerprint in force (:func:`in_force`).
    ``record=False``: the same check, read only (a suite checks its contestants before anything
    runs, and writes nothing): a new run's fingerprint is returned, not written."""
    old = read_json_if_exists(path)
    if old is None:
        if record:
            write_json(path, new)
        return new
    if (kept := in_force(old, new, moved)) is not new:
        return kept
    lines = tuple(change_lines(old, new, moved=moved))
    changes = "\n".join(f"  {line}" for line in lines)
    raise FingerprintMismatch(
        f"{path.parent}: refusing to resume, the run was started under a different configuration:\n"
        f"{changes}\nScores from the two would not be comparable: choose a new run_name or output_dir.", lines)


# --- what the shared layer puts into every fingerprint, whatever the benchmark returns -------------

PANEL_SETTINGS = ("reasoning", "send_temperature", "token_param", "strip_think", "approximation")


def shared_parts(config: RunConfig, benchmark: Any) -> dict[str, Any]:
    """The part every run's fingerprint holds under ``"shared"``, set here and never
    by a benchmark (a benchmark's own ``"shared"``, ``"retry"``, ``"judge_panel"``,
    ``"prompts"`` or ``"tasks"`` part is left out): the retry policy; the judge panel, each
    judge's role, provider, model and the settings that change what it replies
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
    """The fingerprint parts that must agree for ``compare``: the benchmark's and the shared
    part (which stands for its keys: :func:`differing`)."""
    return (*declared, SHARED)


def run_fingerprint(config: RunConfig, benchmark: Any) -> dict[str, Any]:
    """A run's fingerprint, the one way every command makes it: the benchmark's own parts (but
    none named like the shared part or one of its keys, and none of the key paths it declares
    the shared part's: :func:`moved_to_shared`), the shared part (:func:`shared_parts`), the
    endpoints' response settings (``RunConfig.response_parts``) and the subset of the data a
    run took (``evalnb run --limit``, :mod:`evalnb.core.subset`)."""
    own = {k: v for k, v in benchmark.fingerprint_parts().items() if k != SHARED and k not in SHARED_KEYS}
    parts = _left_out(own, moved_to_shared(benchmark))
    return fingerprint(parts | shared_parts(config, benchmark) | config.response_parts()
                       | subset.fingerprint_part(config.subset))
