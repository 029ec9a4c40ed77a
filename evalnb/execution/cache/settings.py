"""Where the response cache lives and whether a run uses it.

On by default, one folder per user: a researcher re-judging a leaderboard with a second
panel, adding a metric, or running one contestant in two suites sends the same requests
again, and at long documents those generations are most of a study's cost. Reuse is safe
because the key is the exact request and the sample's index (:mod:`evalnb.execution.cache.keys`):
an answer is reused only for the very request that produced it, and every reused answer
is declared in its record. A fresh draw (to measure an endpoint again, or its drift over
time) is one switch away: ``cache: false`` or ``--no-cache``.

The folder, first found: the parameters' ``cache.path``; the ``EVALNB_CACHE`` variable
(``off`` turns the cache off for every run of the process); else the platform's cache
folder: ``$XDG_CACHE_HOME/evalnb`` or ``~/.cache/evalnb`` (Linux and other Unixes),
``~/Library/Caches/evalnb`` (macOS), ``%LOCALAPPDATA%\\evalnb\\Cache`` (Windows).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_VAR = "EVALNB_CACHE"
OFF_WORDS = frozenset({"off", "0", "false", "no"})


@dataclass(frozen=True)
class CacheSettings:
    """A run's use of the cache: the folder, the roles always called fresh, the oldest answer reused."""

    root: Path
    fresh: frozenset[str] = frozenset()
    max_age_days: float | None = None


def default_root() -> Path:
    """The platform's per-user cache folder for evalnb."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "evalnb"
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        return (Path(base) if base else Path.home() / "AppData" / "Local") / "evalnb" / "Cache"
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache") / "evalnb"


def cache_root(configured: str | None = None) -> Path | None:
    """The cache folder (``configured`` first, then the variable, then the platform's);
    None when the variable turns the cache off."""
    if configured:
        return Path(configured).expanduser()
    value = os.environ.get(ENV_VAR, "").strip()
    if value.lower() in OFF_WORDS:
        return None
    return Path(value).expanduser() if value else default_root()


def settings_from(options: dict[str, Any] | None) -> CacheSettings | None:
    """A run's settings from its resolved ``cache`` parameter; None when the run uses no cache."""
    options = options or {}
    if options.get("enabled") is False:
        return None
    root = cache_root(options.get("path"))
    if root is None:
        return None
    return CacheSettings(root, frozenset(options.get("fresh") or ()), options.get("max_age_days"))
