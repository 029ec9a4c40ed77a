"""``evalnb cache``: what the response cache holds, and pruning or clearing it.

``evalnb cache`` shows the folder, its entries and size, and per endpoint the entries, the
answers reused from them and the dates of their original calls; ``--older-than DAYS`` and
``--model NAME`` remove the entries they name (both: those that match both); ``--clear``
removes every entry. Damaged entries are listed and removed by any pruning. Temporary files
of writers that died more than an hour ago are removed by any pruning too.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from evalnb.execution.cache.reuse import DAY_SECONDS, iso
from evalnb.execution.cache.settings import cache_root
from evalnb.execution.cache.store import CacheStore, Damaged


def cache_command(path: Path | None, older_than: float | None, model: str | None, clear: bool) -> int:
    root = path or cache_root()
    if root is None:
        print("evalnb: the response cache is off (EVALNB_CACHE=off)")
        return 0
    store = CacheStore(root)
    if clear:
        store.clear()
        print(f"evalnb: cleared the response cache at {root}")
        return 0
    if older_than is not None or model is not None:
        removed = prune(store, older_than, model)
        print(f"evalnb: removed {removed} entries from the response cache at {root}")
        return 0
    for line in summary_lines(store):
        print(line)
    return 0


def prune(store: CacheStore, older_than: float | None, model: str | None) -> int:
    """Remove the entries both conditions name (and every damaged entry); how many were removed."""
    removed, now = 0, time.time()
    for path, entry in store.entries():
        if isinstance(entry, Damaged):
            matches = True
        else:
            old = older_than is None or now - float(entry.get("called_at") or 0) > older_than * DAY_SECONDS
            named = model is None or (entry.get("endpoint") or {}).get("model") == model
            matches = old and named
        if matches:
            path.unlink(missing_ok=True)
            removed += 1
    for temporary in store.stale_temporaries(now):
        temporary.unlink(missing_ok=True)
    return removed


def summary_lines(store: CacheStore) -> list[str]:
    hits = store.hits()
    rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"entries": 0, "hits": 0, "times": []})
    size, damaged = 0, []
    for path, entry in store.entries():
        size += path.stat().st_size
        if isinstance(entry, Damaged):
            damaged.append(entry)
            continue
        endpoint = entry.get("endpoint") or {}
        name = f"{endpoint.get('provider')}:{endpoint.get('model')} @ {endpoint.get('base_url') or 'default host'}"
        row = rows[name]
        row["entries"] += 1
        row["hits"] += hits.get(path.stem, 0)
        row["times"].append(float(entry.get("called_at") or 0))
    total = sum(r["entries"] for r in rows.values())
    lines = [f"response cache: {store.root}", f"  {total} entries, {size / 1e6:.1f} MB, "
                                               f"{sum(hits.values())} answers reused in all"]
    for name, row in sorted(rows.items()):
        first, last = iso(min(row["times"]))[:10], iso(max(row["times"]))[:10]
        lines.append(f"  {name}: {row['entries']} entries, {row['hits']} reused, original calls {first} to {last}")
    lines += [f"  damaged: {d.path} ({d.problem})" for d in damaged]
    return lines
