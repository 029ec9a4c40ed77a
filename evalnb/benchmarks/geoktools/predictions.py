"""GeoKTools' answers: an agent run's predictions file (JSONL ``{id, response}``), read once.

A null or absent response scores 0 (reading 22); duplicates keep the first line; unknown ids
are reported and ignored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.core.data import Where, read_jsonl, record_id
from evalnb.core.errors import DataError


@dataclass(frozen=True)
class Predictions:
    responses: dict[str, str]     # a null or absent response is kept as "" (scores 0, reading 22)
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
    unknown, duplicates, no_response = [], [], []
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
        if case_id not in known:
            unknown.append(case_id)
        elif case_id in responses:
            duplicates.append(case_id)
        else:
            responses[case_id] = response or ""
            if response is None:
                no_response.append(case_id)
    return Predictions(responses, unknown, duplicates, [c for c in case_ids if c not in responses],
                       no_response, hashlib.sha256(data).hexdigest())
