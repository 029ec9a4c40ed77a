"""WildTrace answers produced elsewhere (``responses: FILE``).

The protocol's own scripts are two steps (answer, then judge a responses file), so answers
are often produced outside evalnb: by a model behind an internal service, by a paper's
authors, or by an earlier evalnb run to be graded under another panel. Accepted shapes:

- JSON, a list of objects ``{"task_id", "response", "status"?}``;
- JSON, an object keyed by task id whose values are such objects (``task_id`` optional,
  and equal to the key when given) or the response itself (a string);
- evalnb's own ``responses.json`` of another run, as it is (``{"benchmark": "wildtrace",
  "records": [...]}``);
- JSONL (by the ``.jsonl`` suffix), one object per line as in the list.

Other fields are ignored. Decisions where the issue is silent (docs/records.md):

- ``status`` absent: a non-blank string is ``ok``, a blank one ``empty`` (as a generated
  blank answer would be); ``null`` without a status is malformed.
- ``status`` given: ``ok``, ``empty``, ``refused`` or ``failed_permanent`` are taken as the
  answer's status (``ok`` needs a string; a blank one is ``empty``). ``out_of_context``,
  ``missing``, ``pending`` or ``failed_transient`` say the file holds no answer: the task is
  ``missing`` in this run (unless this run's own cap puts it out of context), and the report
  says which status the file gave. Any other status is malformed.
- A task id given twice is malformed (which answer would be graded?); ids the data file
  does not have are ignored and listed in the report.

The contestant's cap, not the file, decides ``out_of_context``: such a task scores 0 and is
judged by nobody whatever the file holds (the report counts those the file answered).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.core.data import Where, read_jsonl, record_id
from evalnb.core.errors import DataError
from evalnb.core.types import Status

ANSWER_STATUSES = frozenset({"ok", "empty", "refused", "failed_permanent"})
NO_ANSWER_STATUSES = frozenset({"out_of_context", "missing", "pending", "failed_transient"})


@dataclass(frozen=True)
class ImportedAnswer:
    status: str              # the status this run records (ok, empty, refused, failed_permanent)
    text: str | None
    entry: str               # where it is in the file: "line 3", "entry #2", "entry 'wt-1'"
    file_status: str | None  # the status the file gave, if any


@dataclass(frozen=True)
class ImportedResponses:
    path: Path
    sha256: str
    shape: str                              # json-list, json-object, evalnb-responses, jsonl
    answers: dict[str, ImportedAnswer]      # task id -> a usable answer
    unanswered: dict[str, str]              # task id -> the no-answer status the file gave
    unknown_ids: list[str]
    model: dict[str, Any] | None            # evalnb's responses.json names its contestant

    def record_fields(self, task_id: str, in_scope: bool) -> dict[str, Any]:
        """The generate record's fields for one task (besides key, endpoint, task id, route)."""
        answer = self.answers.get(task_id)
        fields: dict[str, Any] = {"source": "imported"}
        if answer is not None:
            fields["imported_entry"] = answer.entry
            if answer.file_status is not None:
                fields["file_status"] = answer.file_status
        elif task_id in self.unanswered:
            fields["file_status"] = self.unanswered[task_id]
        if not in_scope:   # out of context: the cap decides, whatever the file holds
            return fields | {"status": Status.OUT_OF_CONTEXT.value, "text": None}
        if answer is None:
            return fields | {"status": Status.MISSING.value, "text": None}
        return fields | {"status": answer.status, "text": answer.text}

    def report(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """What scores.json says about the import (``rows``: its task rows)."""
        over_cap = [r["task_id"] for r in rows if r["status"] == Status.OUT_OF_CONTEXT and r["task_id"] in self.answers
                    and self.answers[r["task_id"]].text is not None]
        missing = [r["task_id"] for r in rows if r["status"] == Status.MISSING]
        return {"file": str(self.path), "sha256": self.sha256, "shape": self.shape,
                "answers": len(self.answers),
                "out_of_context_answered": len(over_cap), "out_of_context_answered_ids": over_cap,
                "missing": len(missing), "missing_ids": missing,
                "file_statuses_without_answer": {t: self.unanswered[t] for t in missing if t in self.unanswered},
                "unknown_ids": self.unknown_ids,
                **({"source_model": self.model} if self.model else {}),
                "note": "imported answers, no model call; the contestant's cap decides out_of_context "
                        "(scored 0, judged by nobody, whatever the file holds); a task the file does not "
                        "answer is missing: final, scored 0 in All"}


def _answer(raw: Any, where: Where, key_id: str | None) -> tuple[str, str | None, Any, bool]:
    """(task id, status given or None, response, whether a response field was given)."""
    if key_id is not None and not isinstance(raw, Mapping):
        return key_id, None, raw, True   # {"task": "the answer"}
    if not isinstance(raw, Mapping):
        raise where.error("expected an object {task_id, response, status?}")
    if key_id is not None:
        if "task_id" in raw and str(raw["task_id"]) != key_id:
            raise where.error(f"{raw['task_id']!r} differs from the key {key_id!r}", "task_id")
        task_id = key_id
    else:
        task_id = record_id(raw, "task_id", where)
    status = raw.get("status")
    if status is not None and not isinstance(status, str):
        raise where.error(f"expected a string, got {type(status).__name__}", "status")
    if "response" not in raw:
        if status in NO_ANSWER_STATUSES:
            return task_id, status, None, False
        raise where.error("missing", "response")
    return task_id, status, raw["response"], True


def _checked(task_id: str, status: str | None, response: Any, where: Where, entry: str) -> ImportedAnswer | str:
    """A usable answer, or the no-answer status the file gave."""
    where = Where(where.source, where.line, where.task or task_id)
    if status is not None and status not in ANSWER_STATUSES | NO_ANSWER_STATUSES:
        raise where.error(f"{status!r} is not one of {', '.join(sorted(ANSWER_STATUSES | NO_ANSWER_STATUSES))}",
                          "status")
    if response is not None and not isinstance(response, str):
        raise where.error(f"expected a string (or null with a status other than ok), got {type(response).__name__}",
                          "response")
    if response is None and status in (None, Status.OK):
        raise where.error("null needs a status other than ok" if status else "null without a status",
                          "response")
    if status in NO_ANSWER_STATUSES:
        return str(status)
    if response is None:   # refused, empty or failed_permanent without text
        return ImportedAnswer(str(status), None, entry, status)
    derived = Status.OK.value if response.strip() else Status.EMPTY.value
    final = derived if status in (None, Status.OK) else str(status)
    return ImportedAnswer(final, response, entry, status)


def _entries(path: Path, data: bytes) -> tuple[str, list[tuple[Where, str, Any, str | None]], dict[str, Any] | None]:
    """The file's shape and its entries: (where, entry label, raw value, key id if keyed)."""
    source = str(path)
    if path.suffix == ".jsonl":
        return "jsonl", [(Where(source, line), f"line {line}", raw, None) for line, raw in read_jsonl(path, data)], None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(source, f"not UTF-8 ({e.reason} at byte {e.start})") from None
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        for k, v in items:
            if k in seen:
                duplicates.append(k)
            seen[k] = v
        return seen
    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError as e:
        raise DataError(source, f"invalid JSON: {e.msg}", line=e.lineno) from None
    model = None
    if isinstance(value, dict) and isinstance(value.get("records"), list):   # evalnb's responses.json
        if value.get("benchmark", "wildtrace") != "wildtrace":
            raise DataError(source, f"responses of a {value.get('benchmark')!r} run, not wildtrace", field="benchmark")
        shape, items, model = "evalnb-responses", value["records"], value.get("model")
    elif isinstance(value, list):
        shape, items = "json-list", value
    elif isinstance(value, dict):
        if duplicates:
            raise DataError(source, "given twice", task=duplicates[0], field="task_id")
        return "json-object", [(Where(source, task=k), f"entry {k!r}", v, k) for k, v in value.items()], None
    else:
        raise DataError(source, "expected a list of answers, an object keyed by task id, or evalnb's responses.json")
    return shape, [(Where(source, task=f"#{i}"), f"entry #{i}", raw, None) for i, raw in enumerate(items)], model


def read_responses(path: Path, task_ids: Sequence[str]) -> ImportedResponses:
    """Every answer in ``path``, checked (one DataError naming file, line or entry, and field);
    its hash is taken from the same bytes."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(str(path), "file not found") from None
    shape, entries, model = _entries(path, data)
    if not entries:
        raise DataError(str(path), "no answers")
    known = set(task_ids)
    answers: dict[str, ImportedAnswer] = {}
    unanswered: dict[str, str] = {}
    first: dict[str, str] = {}
    unknown: list[str] = []
    for where, entry, raw, key_id in entries:
        task_id, status, response, _ = _answer(raw, where, key_id)
        if task_id in first:
            raise Where(where.source, where.line, where.task or task_id).error(
                f"task {task_id!r} given twice (first at {first[task_id]})", "task_id")
        first[task_id] = entry
        checked = _checked(task_id, status, response, where, entry)
        if task_id not in known:
            unknown.append(task_id)
        elif isinstance(checked, str):
            unanswered[task_id] = checked
        else:
            answers[task_id] = checked
    return ImportedResponses(path, hashlib.sha256(data).hexdigest(), shape, answers, unanswered, unknown,
                             dict(model) if isinstance(model, Mapping) else None)


def source_model_warning(imported: ImportedResponses, provider: str, name: str) -> str | None:
    """evalnb's responses.json names its contestant: say so when the model block names another."""
    if imported.model and imported.model.get("name") not in (None, name):
        return (f"responses: {imported.path} holds the answers of {imported.model.get('provider')}:"
                f"{imported.model.get('name')}, but model names {provider}:{name}; the model block's caps "
                "decide out_of_context and its name labels the run")
    return None


def report_table(report: Mapping[str, Any] | None) -> list[tuple[str, Any]]:
    """The report's table of an import (none for a run whose model answered): what came from
    the file, the answers its cap overruled, and every missing task with what the file said."""
    if not report:
        return []
    import pandas as pd

    def ids(values: Sequence[str]) -> str:
        return ", ".join(values) if values else "-"
    rows = [("file", Path(report["file"]).name), ("sha256", report["sha256"]),   # the name: no machine path ("shape", report["shape"]),
            ("answers in the file for tasks of the data file", report["answers"]),
            ("out of context under this run's cap, though the file answers them (scored 0, not judged)",
             report["out_of_context_answered"]),
            ("  those tasks", ids(report["out_of_context_answered_ids"])),
            ("missing: the file does not answer them (scored 0 in All)", report["missing"]),
            ("  those tasks", ids([f"{t} (file status {report['file_statuses_without_answer'][t]})"
                                   if t in report["file_statuses_without_answer"] else t
                                   for t in report["missing_ids"]])),
            ("ids not in the data file (ignored)", ids(report["unknown_ids"]))]
    if report.get("source_model"):
        rows.append(("the file's own contestant", f"{report['source_model'].get('provider')}:"
                                                   f"{report['source_model'].get('name')}"))
    table = pd.DataFrame([(k, str(v)) for k, v in rows], columns=["", "value"]).set_index("")
    return [("imported answers (responses:)", table)]
