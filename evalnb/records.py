"""What a run leaves on disk: append-only JSONL stores and atomically written JSON.

A stage store holds one line per finished call. The latest line for a key wins, so a
resumed run appends instead of rewriting, and a process killed mid-write leaves at most a
torn last line, which is dropped (that call was still in flight) and redone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from evalnb.errors import DataError


def write_json(path: Path, value: Any) -> None:
    """Write whole or not at all: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n", "utf-8")
    os.replace(tmp, path)


def read_json_if_exists(path: Path) -> Any:
    return json.loads(path.read_text("utf-8")) if path.exists() else None


class JsonlStore:
    """One stage's records, keyed by ``record["key"]``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: TextIO | None = None

    def load(self) -> dict[str, dict[str, Any]]:
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        records: dict[str, dict[str, Any]] = {}
        lines = raw.split(b"\n")
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                if number == len(lines):   # torn final line: the write a kill interrupted
                    self._truncate(len(raw) - len(line))
                    break
                raise DataError(str(self.path), "corrupt record (not JSON)", line=number) from None
            records[record["key"]] = record
        return records

    def _truncate(self, size: int) -> None:
        with self.path.open("r+b") as f:
            f.truncate(size)

    def append(self, record: Mapping[str, Any]) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("a", encoding="utf-8")
        # One write and a flush per record: a killed process loses only calls in flight.
        self._file.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
