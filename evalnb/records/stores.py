"""What a run leaves on disk: append-only JSONL stores and atomically written JSON.

A stage store holds one line per finished call. The latest line for a key wins, so a
resumed run appends instead of rewriting. A process killed mid-write leaves at most a torn
last line: it is dropped (that call was still in flight) and redone; a complete last
record that only lacks its newline is kept and the newline added. Everything written
passes through the secret filter (values of the run's key variables), and every file gets
the mode any tool's new file gets, ``0666`` less the umask, so a lab's shared results
directory is readable as its umask intends (an atomic write's temporary file is made
``0600``, and its mode would survive the rename).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from evalnb.core.errors import DataError
from evalnb.core.redaction import redact_values
from evalnb.core.types import FAILED_ENDPOINT
from evalnb.records.validation import stored_record_problem


def write_json(path: Path, value: Any, *, indent: int | None = 2) -> None:
    """Write whole or not at all: a reader never sees half a file. ``indent=None`` for large
    files read by programs (about five times faster to write: json's C encoder)."""
    write_text(path, json_text(value, indent))


def json_text(value: Any, indent: int | None = 2) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False, default=str) + "\n"


def json_unchanged(path: Path, value: Any) -> bool:
    """True when ``path`` holds exactly what :func:`write_json` would write for ``value``."""
    try:
        return path.read_text("utf-8") == redact_values(json_text(value))
    except (OSError, UnicodeDecodeError):
        return False


_umask_lock = threading.Lock()


def current_umask() -> int:
    """The process's umask, read without changing it (Linux: ``/proc/self/status``); elsewhere
    set and put back at once, under a lock, so no thread of this process writes between."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> None:
    """Write whole or not at all, the registered key values redacted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = redact_values(text)
    # A unique temporary name: two writers never share (or remove) each other's file.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if hasattr(os, "fchmod"):   # not on Windows before Python 3.13 (no umask there)
            os.fchmod(fd, 0o666 & ~current_umask())   # as open() would have made it
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json_if_exists(path: Path) -> Any:
    return json.loads(path.read_text("utf-8")) if path.exists() else None


_REPORTED: set[tuple[Path, int]] = set()   # stores whose unreadable lines were reported

Record = dict[str, Any]


def parse_store(path: Path) -> list[tuple[int, Record | None]]:
    """Every non-blank line of a store, numbered from 1, parsed: None for a line that is not a
    JSON object with a ``key`` (torn or damaged). Read only; no file, no lines. Every reader of a
    store parses it here, once per read (what a test counts, and the benchmark measures)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return [(number, _parse_record(line)) for number, line in enumerate(data.split(b"\n"), start=1) if line.strip()]


def read_lines(path: Path) -> list[Record]:
    """Every record of a stage store in the order written, read only: a torn last line (a call
    still in flight when its process died) is skipped, never healed; no file, no records."""
    return [record for _, record in parse_store(path) if record is not None]


def latest_of(lines: Iterable[Record]) -> dict[str, Record]:
    """The latest of ``lines`` for each key (a later line replaces an earlier one)."""
    return {str(record["key"]): record for record in lines}


def latest_records(path: Path) -> dict[str, Record]:
    """The latest line of each key of a store, read only: what every reader that must not write
    uses (``evalnb status``, a suite's state, ``evalnb prompt``, the failure summary), since
    another process may be writing the run. It differs from :meth:`JsonlStore.load`, the
    writer's loader, on purpose: a line that does not parse (a torn last line, or a damaged line
    anywhere) is skipped, where the loader mends a torn last line in place and refuses a damaged
    one; endpoint failures are kept (the loader leaves them out unless asked); and the record
    rule is not applied (the loader leaves out, and reports, a line that breaks it)."""
    return latest_of(read_lines(path))


class JsonlStore:
    """One stage's records, keyed by ``record["key"]``.

    The file is parsed once and then kept up with what this store appends, so a stage pass
    that asks for its records before, during and after its calls parses its store once. Each
    read checks the file's size and modification time against what this store last read or
    wrote: another writer's line (another store on the same file, another process) makes the
    next read parse the file again."""

    def __init__(self, path: Path, *, records: bool = True) -> None:
        """``records``: the lines are call records, checked as such when loaded (a line with no
        string ``status`` is an older version's, reported and left out); False for a keyed
        log of another kind (the batch journal), loaded as it is."""
        self.path = path
        self.records = records
        self._file: TextIO | None = None
        self._lines: list[Record] = []
        self._numbers: list[int] = []   # each line's number in the file (a report names it)
        self._seen: tuple[int, int] | None = None   # (size, mtime_ns) of the file as _lines hold it; None: not read

    def lines(self) -> list[Record]:
        """Every line in the order written (healed first: see :meth:`_heal`); a damaged line
        is refused (:class:`DataError`). Parsed again only when the file changed under it."""
        if self._seen is not None and self._seen == _file_state(self.path):
            return self._lines
        if self.path.exists():
            self._heal()
        lines: list[Record] = []
        numbers: list[int] = []
        for number, record in parse_store(self.path):
            if record is None:
                raise DataError(str(self.path), "corrupt record (not a JSON object with a key)", line=number)
            lines.append(record)
            numbers.append(number)
        self._lines, self._numbers, self._seen = lines, numbers, _file_state(self.path)
        return self._lines

    def load(self, *, endpoint_failures: bool = False) -> dict[str, Record]:
        """The latest record of each key. A line of an endpoint failure
        (``FAILED_ENDPOINT``) is the endpoint's, not its item's: it is left out (the item is
        pending, and resumes), unless ``endpoint_failures`` asks for every line's say. Each
        record is a copy: a caller that changes one changes no other caller's."""
        records: dict[str, Record] = {}
        unreadable: list[str] = []
        lines = self.lines()   # first: it sets the line numbers
        for number, record in zip(self._numbers, lines):
            if self.records and (problem := stored_record_problem(record)):   # an older version's line: its call is made again
                unreadable.append(f"line {number} ({record['key']}): {problem}")
                continue
            if endpoint_failures or record.get("status") != FAILED_ENDPOINT:
                records[record["key"]] = dict(record)
        if unreadable and (self.path, len(unreadable)) not in _REPORTED:
            from evalnb.views.progress import say

            _REPORTED.add((self.path, len(unreadable)))   # once per process, not at every load

            say(f"WARNING: {self.path}: {len(unreadable)} record(s) do not follow the record rule and are "
                f"left out (their calls are made again): {'; '.join(unreadable[:3])}"
                + (" ..." if len(unreadable) > 3 else ""))
        return records

    def _heal(self) -> None:
        """End the file on a newline: keep a complete unterminated record, drop a torn one."""
        with self.path.open("r+b") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            # Find the start of the unterminated last line, reading backwards in blocks.
            start, block = size, 1 << 16
            while start > 0:
                begin = max(0, start - block)
                f.seek(begin)
                newline = f.read(start - begin).rfind(b"\n")
                if newline >= 0:
                    start = begin + newline + 1
                    break
                start = begin
            f.seek(start)
            if _parse_record(f.read()) is not None:
                f.write(b"\n")      # a complete record whose newline the kill cut off
            else:
                f.truncate(start)   # the write a kill interrupted: that call is redone

    def append(self, record: Mapping[str, Any]) -> None:
        kept = self._seen is not None and self._seen == _file_state(self.path)   # _lines are the file so far
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                self._heal()   # every append starts on a fresh line
            self._file = self.path.open("a", encoding="utf-8")
        # One write and a flush per record: a killed process loses only calls in flight.
        text = redact_values(json.dumps(record, ensure_ascii=False, default=str))
        self._file.write(text + "\n")
        self._file.flush()
        if kept:   # as the file holds it, redacted and through JSON: as a parse would read it
            self._lines.append(json.loads(text))
            self._numbers.append(self._numbers[-1] + 1 if self._numbers else 1)
            self._seen = _stat_state(os.fstat(self._file.fileno()))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _parse_record(line: bytes) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) and "key" in record else None


_ABSENT = (-1, -1)


def _file_state(path: Path) -> tuple[int, int]:
    """What says whether a store changed since it was read: its size and modification time."""
    try:
        return _stat_state(path.stat())
    except FileNotFoundError:
        return _ABSENT


def _stat_state(stat: os.stat_result) -> tuple[int, int]:
    return stat.st_size, stat.st_mtime_ns
