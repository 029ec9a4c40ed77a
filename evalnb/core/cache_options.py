"""The ``cache`` parameter, checked: whether and where a run reuses earlier replies.

``cache`` absent or ``true``: on, in the user's cache folder. ``cache: false``: off for the
run (nothing read, nothing written). A mapping sets any of ``path`` (the cache folder),
``max_age_days`` (older answers are not reused: the call is made again and its answer
replaces them) and ``fresh`` (the roles whose calls are always made: ``[model]`` keeps the
contestant fresh while the judges' verdicts are reused), and ``enabled``. The parameter is
no part of the fingerprint: a reused answer is the answer to the same request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalnb.core.errors import ConfigError

CACHE_KEYS = frozenset({"enabled", "path", "max_age_days", "fresh"})


def check_cache(raw: Any, source: str, roles: Sequence[str]) -> dict[str, Any] | None:
    """The resolved ``cache`` parameter (None: the default, on, nothing set)."""
    if raw is None or raw is True:
        return None
    if raw is False:
        return {"enabled": False}
    if not isinstance(raw, dict) or set(raw) - CACHE_KEYS:
        raise ConfigError(f"{source}: cache: expected true, false or {{path, max_age_days, fresh, enabled}}, "
                          f"got {raw!r}")
    checked: dict[str, Any] = {}
    if "enabled" in raw:
        if not isinstance(raw["enabled"], bool):
            raise ConfigError(f"{source}: cache.enabled: expected true or false, got {raw['enabled']!r}")
        checked["enabled"] = raw["enabled"]
    if raw.get("path") is not None:
        if not isinstance(raw["path"], str) or not raw["path"].strip():
            raise ConfigError(f"{source}: cache.path: expected a folder path, got {raw['path']!r}")
        checked["path"] = raw["path"]
    if raw.get("max_age_days") is not None:
        age = raw["max_age_days"]
        if not isinstance(age, (int, float)) or isinstance(age, bool) or age <= 0:
            raise ConfigError(f"{source}: cache.max_age_days: expected a positive number of days, got {age!r}")
        checked["max_age_days"] = float(age)
    if raw.get("fresh") is not None:
        fresh = raw["fresh"]
        if isinstance(fresh, str):
            fresh = [fresh]
        if not isinstance(fresh, list) or not all(isinstance(r, str) for r in fresh):
            raise ConfigError(f"{source}: cache.fresh: expected a list of roles ({', '.join(roles)}), got {fresh!r}")
        unknown = [r for r in fresh if r not in roles]
        if unknown:
            raise ConfigError(f"{source}: cache.fresh: no endpoint {', '.join(map(repr, unknown))} in this run "
                              f"(its roles: {', '.join(roles)})")
        checked["fresh"] = sorted(set(fresh))
    return checked or None
