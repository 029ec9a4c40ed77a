"""Reading input files strictly: every problem names the file, line or task, and field.

Benchmark modules describe their own task shapes; this module holds what they share:
JSON and JSONL reading, typed field access, and the corpus directory.
"""

from __future__ import annotations

import codecs
import functools
import json
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from evalnb.core.errors import DataError

T = TypeVar("T")
UTF8_BLOCK = 1 << 20


def read_json(path: Path) -> Any:
    """The JSON value in ``path``; a missing file, bad UTF-8 or bad JSON is a DataError naming the line."""
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise DataError(str(path), "file not found") from None
    except UnicodeDecodeError as e:
        raise DataError(str(path), f"not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(str(path), f"invalid JSON: {e.msg}", line=e.lineno) from None


def read_jsonl(path: Path, raw: bytes | None = None) -> Iterator[tuple[int, Any]]:
    """Yield ``(line_number, object)`` for every non-blank line (of ``raw``, the file's bytes
    already read, when given)."""
    if raw is None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise DataError(str(path), "file not found") from None
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise DataError(str(path), f"not UTF-8 ({e.reason})", line=number) from None
        except json.JSONDecodeError as e:
            raise DataError(str(path), f"invalid JSON: {e.msg}", line=number) from None


@dataclass(frozen=True)
class Where:
    """Where a record came from, so that field errors can say so."""

    source: str
    line: int | None = None
    task: str | None = None

    def error(self, problem: str, field: str | None = None) -> DataError:
        """A DataError whose one line names this file, line or task, and ``field``."""
        return DataError(self.source, problem, line=self.line, task=self.task, field=field)


_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", list: "a list",
               dict: "an object", bool: "true or false"}


def require(obj: Mapping[str, Any], name: str, kind: type[T], where: Where, *,
            path: str | None = None) -> T:
    """``obj[name]`` checked to be of ``kind``; ``path`` is the field's full name for errors."""
    label = path or name
    if not isinstance(obj, Mapping):
        raise where.error("expected an object", label.rsplit(".", 1)[0] if "." in label else None)
    if name not in obj or obj[name] is None:
        raise where.error("missing", label)
    value = obj[name]
    ok = isinstance(value, kind) and not (kind in (int, float) and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise where.error(f"expected {_TYPE_NAMES.get(kind, kind.__name__)}, "
                          f"got {type(value).__name__}", label)
    if kind is str and not value.strip():
        raise where.error("empty", label)
    return value  # type: ignore[return-value]


def unique_ids(ids: list[tuple[str, Where]]) -> None:
    """Refuse the second of two equal ids, naming where each stands."""
    seen: dict[str, Where] = {}
    for task_id, where in ids:
        if task_id in seen:
            raise where.error(f"duplicate id {task_id!r} (first seen at "
                              f"{'line ' + str(seen[task_id].line) if seen[task_id].line else 'an earlier task'})",
                              "task_id")
        seen[task_id] = where


def record_id(raw: Mapping[str, Any], name: str, where: Where) -> str:
    """An id field: a non-empty string, or an integer taken as its decimal string."""
    value = raw.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return require(raw, name, str, where)


def first_of_known(record_id: str, known: Container[str], kept: Container[str],
                   unknown: list[str], duplicates: list[str]) -> bool:
    """Whether a side file's line for ``record_id`` is the one to keep: the data holds the id
    and no earlier line of the file had it. An id the data does not hold is listed in
    ``unknown``, a repeated one in ``duplicates`` (the first line wins)."""
    if record_id not in known:
        unknown.append(record_id)
        return False
    if record_id in kept:
        duplicates.append(record_id)
        return False
    return True


def json_records(path: Path, key: str, id_field: str = "id") -> list[tuple[Where, dict[str, Any], str]]:
    """The objects of a JSON list (or of ``{key: [...]}``), each with its id and where it is.

    Ids must be unique; every error names the file, the record and the field.
    """
    data = read_json(path)
    items = data.get(key) if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise Where(str(path)).error(f"expected a non-empty list (or {{\"{key}\": [...]}})", key)
    records = []
    for i, raw in enumerate(items):
        where = Where(str(path), task=f"#{i}")
        if not isinstance(raw, dict):
            raise where.error("expected an object")
        rid = record_id(raw, id_field, where)
        records.append((Where(str(path), task=rid), raw, rid))
    unique_ids([(rid, where) for where, _, rid in records])
    return records


@dataclass
class Corpus:
    """The corpus directory. Documents are read when a call needs them, never all at once."""

    root: Path

    @functools.cached_property
    def _resolved_root(self) -> Path:
        return self.root.resolve()   # once, not once per task

    def path(self, name: str, where: Where) -> Path:
        candidate = (self.root / name).resolve()
        if self._resolved_root not in candidate.parents:
            raise where.error(f"corpus file {name!r} points outside the corpus directory",
                              "corpus_file")
        if not candidate.is_file():
            raise where.error(f"corpus file not found: {self.root / name}", "corpus_file")
        return candidate

    def check_utf8(self, name: str, where: Where) -> None:
        """Fail now, naming the task, if a document would not decode when its call is made.

        Streamed in blocks, so memory stays bounded whatever the document's size.
        """
        path = self.root / name
        decoder = codecs.getincrementaldecoder("utf-8")()
        offset = 0
        try:
            with path.open("rb") as f:
                while block := f.read(UTF8_BLOCK):
                    # ASCII is valid UTF-8, and isascii() is several times faster than a decode.
                    if not (block.isascii() and not decoder.getstate()[0]):
                        decoder.decode(block)
                    offset += len(block)
                decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            raise where.error(f"corpus file {path} is not UTF-8 ({e.reason} near byte {offset + e.start})",
                              "corpus_file") from None

    def read(self, name: str) -> str:
        """The decoded text, exactly: bytes decoded as UTF-8, newlines untouched."""
        path = self.root / name
        try:
            return path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(str(path), f"not UTF-8 ({e.reason} at byte {e.start})") from None
