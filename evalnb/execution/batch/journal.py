"""The batch journal: every batch a run submitted, in the run directory.

``batches.jsonl`` holds one line per change of a batch's entry (the latest line per tag
wins, as in a stage store); ``batches/<tag>.calls.json`` holds the calls a batch carries
(custom id, call key, and the fields the call's record starts from), written before the
batch is submitted.

An entry moves through these states:

- ``intent``: recorded *before* the provider is asked to create the batch. A process that
  dies after the provider accepted the batch but before the journal said so leaves an
  intent; the next run looks the batch up at the provider by its tag before anything is
  submitted again, and adopts it, or (not found) abandons the intent.
- ``submitted``: the provider holds the batch (its id recorded); polled on every run.
- ``collected``: its results are in the stage's store. ``failed``: it failed or expired
  as a whole; its calls were recorded resumable. ``abandoned``: never reached the provider,
  or (Anthropic, adopted by time and size) its results turned out not to be ours.
  ``rejected``: the provider refused to create it (a permanent error, recorded per call).

A batch's tag is ``evalnb-<journal token>-<stage>-<role>-<sequence>``: the journal token is
drawn once per run directory, so a fresh run in a reused directory never adopts an old
run's batch. The tag is written where each provider lets a batch carry it: OpenAI
``metadata.evalnb_tag``, Gemini ``displayName``, Anthropic every request's ``custom_id``.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalnb.records.manifest import utc_now
from evalnb.records.stores import JsonlStore, read_json_if_exists, write_json

JOURNAL_NAME = "batches.jsonl"
CALLS_DIR = "batches"
HEADER = "_journal"
IN_FLIGHT = ("intent", "submitted")
FINAL = ("collected", "failed", "abandoned", "rejected")

Entry = dict[str, Any]


class Journal:
    """The run directory's batch journal (written only by the holder of the run lock)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir
        self.store = JsonlStore(run_dir / JOURNAL_NAME, records=False)   # entries, not call records
        self.entries: dict[str, Entry] = self.store.load()

    @property
    def token(self) -> str:
        header = self.entries.get(HEADER)
        if header is None:
            header = {"key": HEADER, "token": secrets.token_hex(4), "created_at": utc_now()}
            self._write(header)
        return str(header["token"])

    def batches(self, stage: str | None = None) -> list[Entry]:
        return [e for k, e in self.entries.items() if k != HEADER and (stage is None or e["stage"] == stage)]

    def in_flight(self, stage: str | None = None) -> list[Entry]:
        return [e for e in self.batches(stage) if e["state"] in IN_FLIGHT]

    def next_tag(self, stage: str, role: str, taken: int = 0) -> str:
        sequence = sum(1 for e in self.batches(stage) if e["endpoint"] == role) + taken + 1
        return f"evalnb-{self.token}-{stage}-{role}-{sequence:04d}"

    def record(self, entry: Entry) -> Entry:
        entry = {**entry, "updated_at": utc_now()}
        self._write(entry)
        return entry

    def update(self, entry: Entry, **changes: Any) -> Entry:
        return self.record({**self.entries.get(entry["key"], entry), **changes})

    def _write(self, entry: Entry) -> None:
        self.store.append(entry)
        self.entries[entry["key"]] = entry

    def calls_path(self, tag: str) -> Path:
        return self.dir / CALLS_DIR / f"{tag}.calls.json"

    def write_calls(self, tag: str, rows: list[dict[str, Any]]) -> None:
        """``rows``: ``{"custom_id", "key", "fields"}`` per call, in request order."""
        write_json(self.calls_path(tag), {"tag": tag, "calls": rows})

    def calls(self, entry: Entry) -> list[dict[str, Any]]:
        data = read_json_if_exists(self.calls_path(entry["key"]))
        return list(data["calls"]) if data else []

    def close(self) -> None:
        self.store.close()


def read_only(run_dir: Path) -> list[Entry]:
    """The journal's entries without writing anything (not even healing a torn last line):
    for ``evalnb status`` and the report, which may run while a run holds the directory."""
    path = run_dir / JOURNAL_NAME
    entries: dict[str, Entry] = {}
    for entry in _lines(path):
        entries[entry["key"]] = entry
    return [e for k, e in entries.items() if k != HEADER]


def in_flight(run_dir: Path) -> list[Entry]:
    return [e for e in read_only(run_dir) if e["state"] in IN_FLIGHT]


def batched_keys(run_dir: Path, stage: str) -> set[str]:
    """Calls of ``stage`` that a batch still in flight holds (read-only)."""
    if not (run_dir / JOURNAL_NAME).exists():
        return set()
    keys: set[str] = set()
    for entry in in_flight(run_dir):
        if entry["stage"] == stage:
            data = read_json_if_exists(run_dir / CALLS_DIR / f"{entry['key']}.calls.json") or {"calls": []}
            keys.update(row["key"] for row in data["calls"])
    return keys


def _lines(path: Path) -> Iterator[Entry]:
    if not path.exists():
        return
    for line in path.read_bytes().split(b"\n"):
        try:
            entry = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue   # blank, or a torn last line being written
        if isinstance(entry, dict) and "key" in entry:
            yield entry
