"""GeoExpertQueries' queries: the data file read, one query (with its reference material) per task."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from evalnb.core.data import json_records, require

@dataclass(frozen=True)
class ExpertQuery:
    task_id: str
    query: str
    reference: str


def read_queries(path: Path) -> list[ExpertQuery]:
    queries = []
    for where, raw, query_id in json_records(path, "queries"):
        reference = raw.get("reference", raw.get("golden"))
        if reference is not None and not isinstance(reference, str):
            reference = json.dumps(reference, ensure_ascii=False)
        queries.append(ExpertQuery(query_id, require(raw, "query", str, where), reference or "(none)"))
    return queries
