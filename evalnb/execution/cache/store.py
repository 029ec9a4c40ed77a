"""The response cache on disk: one file per entry, written whole or not at all.

Layout: ``ROOT/responses/ab/cd/<key>.json`` (the key's first two pairs of hex digits name
the folders, so no folder grows past a few hundred files at 100,000 entries), and
``ROOT/hits.log``, one short line per answer reused.

Why this shape:

- **No lock held across a call.** A writer makes a temporary file in the entry's own folder
  and renames it over the entry (:func:`os.replace`, atomic on one file system). Two
  processes that answer the same request both write a whole entry; the last rename wins,
  and either is a whole entry for that key. A reader sees the old file, the new one, or none.
- **A killed writer leaves nothing that is served.** What a killed process leaves is at
  most its temporary file (a name starting with ``.``), which no reader opens and
  :func:`prune` removes once it is an hour old.
- **A damaged entry is never returned.** Each entry carries the SHA-256 of its content; one
  that does not parse, does not hold its own key or does not match its digest is reported
  (:class:`Damaged`) and treated as absent, so the call is made again and its answer
  replaces the entry.
- **Hits are counted without a lock**: each reuse appends one line of under 100 bytes to
  ``hits.log`` with a single ``O_APPEND`` write, which POSIX file systems keep whole.

On a shared network folder: NFS (v3 and v4) and SMB keep a rename within one folder
atomic, so entries stay whole; appends to ``hits.log`` from several machines may interleave
on NFS, which only makes the hit counts approximate. A folder synchronised by a file-sync
tool (Dropbox, OneDrive) is not supported: it may deliver a half-copied file, which the
digest then rejects as damaged.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.records.stores import write_text

FORMAT = "evalnb-cache/1"
RESPONSES = "responses"
HITS_LOG = "hits.log"
STALE_TEMP_SECONDS = 3600.0   # a temporary file older than this belongs to a writer that died


@dataclass(frozen=True)
class Damaged:
    """An entry file that could not be used: where, and why (one line)."""

    path: Path
    problem: str

    def line(self) -> str:
        return f"response cache: {self.path}: {self.problem}; skipped, the call is made again"


def content_digest(content: dict[str, Any]) -> str:
    """The SHA-256 of an entry's content as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CacheStore:
    """The entries under one cache folder. Creating one touches nothing on disk."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path_of(self, key: str) -> Path:
        return self.root / RESPONSES / key[:2] / key[2:4] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | Damaged | None:
        """The entry's content, :class:`Damaged` when its file cannot be trusted, None when absent."""
        path = self.path_of(key)
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as error:
            return Damaged(path, f"unreadable ({type(error).__name__})")
        return checked_entry(path, text, key)

    def put(self, key: str, content: dict[str, Any]) -> None:
        """Write the entry whole (temporary file, then rename); an existing entry is replaced."""
        path = self.path_of(key)
        entry = {"format": FORMAT, "key": key, "sha256": content_digest(content), "content": content}
        # The run's atomic writer: a temporary file in the same folder, renamed over the entry.
        # It also passes the text through the secret filter, so no key value reaches the cache.
        write_text(path, json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n")

    def count_hit(self, key: str) -> None:
        """One line in ``hits.log``: the time and the key (one O_APPEND write, no lock)."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / HITS_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, f"{time.time():.0f} {key}\n".encode("ascii"))
        finally:
            os.close(fd)

    def hits(self) -> dict[str, int]:
        """Reuses per key, from ``hits.log`` (a torn last line is ignored)."""
        counts: dict[str, int] = {}
        try:
            lines = (self.root / HITS_LOG).read_text("ascii", errors="replace").splitlines()
        except FileNotFoundError:
            return counts
        for line in lines:
            parts = line.split()
            if len(parts) == 2 and len(parts[1]) == 64:
                counts[parts[1]] = counts.get(parts[1], 0) + 1
        return counts

    def entries(self) -> Iterator[tuple[Path, dict[str, Any] | Damaged]]:
        """Every entry file with its content (or why it is damaged); temporary files are skipped."""
        folder = self.root / RESPONSES
        if not folder.is_dir():
            return
        for path in sorted(folder.glob("*/*/*.json")):
            try:
                text = path.read_text("utf-8")
            except (OSError, UnicodeDecodeError) as error:
                yield path, Damaged(path, f"unreadable ({type(error).__name__})")
                continue
            yield path, checked_entry(path, text, path.stem)

    def stale_temporaries(self, now: float | None = None) -> list[Path]:
        """Temporary files of writers that died (older than an hour)."""
        folder, now = self.root / RESPONSES, time.time() if now is None else now
        if not folder.is_dir():
            return []
        found = []
        for path in folder.glob("*/*/.*.tmp"):
            try:
                if now - path.stat().st_mtime > STALE_TEMP_SECONDS:
                    found.append(path)
            except FileNotFoundError:
                continue
        return found

    def clear(self) -> None:
        """Remove every entry and the hit counts; the folder itself stays."""
        shutil.rmtree(self.root / RESPONSES, ignore_errors=True)
        (self.root / HITS_LOG).unlink(missing_ok=True)


def checked_entry(path: Path, text: str, key: str) -> dict[str, Any] | Damaged:
    """The content of an entry file's text, or why it cannot be trusted."""
    try:
        entry = json.loads(text)
    except ValueError:
        return Damaged(path, "not a whole JSON entry")
    if not isinstance(entry, dict) or entry.get("format") != FORMAT or not isinstance(entry.get("content"), dict):
        return Damaged(path, f"not an entry of format {FORMAT}")
    if entry.get("key") != key:
        return Damaged(path, "holds another key than its name")
    if entry.get("sha256") != content_digest(entry["content"]):
        return Damaged(path, "its content does not match its digest")
    content: dict[str, Any] = entry["content"]
    return content
