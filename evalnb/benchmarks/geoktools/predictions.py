"""GeoKTools' answers: where they come from, and an agent run's predictions file (JSONL
``{id, response}``), read once.

A null or absent response scores 0; duplicates keep the first line; unknown ids are reported
and ignored. Each predictions file is one agent run (a repeat, protocol §3).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.core.data import Where, first_of_known, read_jsonl, record_id
from evalnb.core.errors import DataError
from evalnb.core.run_config import RunConfig


@dataclass(frozen=True)
class Predictions:
    responses: dict[str, str]     # a null or absent response is kept as "" (it scores 0)
    unknown_ids: list[str]
    duplicate_ids: list[str]
    missing_ids: list[str]
    no_response_ids: list[str]
    sha256: str

    def report(self, path: Path) -> dict[str, Any]:
        return {"file": str(path), "sha256": self.sha256, "predicted": len(self.responses),
                "unknown_ids": self.unknown_ids, "duplicate_ids": self.duplicate_ids,
                "missing_ids": self.missing_ids, "no_response_ids": self.no_response_ids,
                "note": "duplicates: the first line is used; unknown ids are ignored; a "
                        "missing prediction, or a line whose response is null or absent, scores 0"}


def read_predictions(path: Path, case_ids: Sequence[str]) -> Predictions:
    """One agent run's answers, the file read once (its hash from the same bytes)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(str(path), "file not found") from None
    responses: dict[str, str] = {}
    unknown: list[str] = []
    duplicates: list[str] = []
    no_response: list[str] = []
    known = set(case_ids)
    for line, raw in read_jsonl(path, data):
        where = Where(str(path), line)
        if not isinstance(raw, dict):
            raise where.error("expected an object {id, response}")
        case_id = record_id(raw, "id", where)
        response = raw.get("response")
        if response is not None and not isinstance(response, str):
            raise Where(str(path), line, case_id).error(
                f"expected a string (may be empty), null or no field; got {type(response).__name__}",
                "response")
        if first_of_known(case_id, known, responses, unknown, duplicates):
            responses[case_id] = response or ""
            if response is None:
                no_response.append(case_id)
    return Predictions(responses, unknown, duplicates, [c for c in case_ids if c not in responses],
                       no_response, hashlib.sha256(data).hexdigest())


def prediction_files(config: RunConfig) -> list[Path]:
    """Where the answers come from, and how many agent runs that makes (protocol §3): the
    predictions files, or none when the model answers each query."""
    value, repeats = config.options["predictions"], config.options["repeats"]
    if value is None:
        if config.model.provider in ("offline", "none"):
            raise config.error("predictions", "required unless a model answers the queries "
                                              "(there is no offline GeoKTools agent)")
        return []
    if not (isinstance(value, str) and value) and not (
            isinstance(value, list) and value and all(isinstance(p, str) and p for p in value)):
        raise config.error("predictions", f"expected a file, or a list of files (one per agent run), got {value!r}")
    files = [Path(p) for p in value] if isinstance(value, list) else [Path(value)]
    for i, file in enumerate(files):
        if not file.is_file():
            raise config.error("predictions" + (f"[{i}]" if isinstance(value, list) else ""),
                               f"{file}: file not found")
    if len(files) == 1 and repeats is not None and repeats > 1:
        # Scoring one set of answers N times measures nothing and reports s.d. 0.
        raise config.error("repeats", f"{repeats} repeats over a single predictions file would score "
                           f"the same answers {repeats} times (s.d. 0). Repeats are agent runs (protocol §3): "
                           f"give predictions as a list of {repeats} files, one per agent run, or omit "
                           f"predictions and give a model, which then answers each query {repeats} times")
    if len(files) > 1 and repeats is not None and repeats != len(files):
        raise config.error("repeats", f"{repeats}, but predictions lists {len(files)} files (one per agent "
                           "run); leave repeats out, or make them agree")
    return files


def identical_warnings(predictions: Sequence[Predictions]) -> list[str]:
    """A warning for each predictions file that repeats an earlier one byte for byte."""
    warnings = []
    seen: dict[str, int] = {}
    for i, run in enumerate(predictions):
        if run.sha256 in seen:
            warnings.append(f"predictions[{i}] is identical to predictions[{seen[run.sha256]}]: "
                            "the same answers in two runs (a deterministic agent, or the same file twice?)")
        seen.setdefault(run.sha256, i)
    return warnings
