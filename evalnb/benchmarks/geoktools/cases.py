"""GeoKTools' cases: the data file read and checked, and one case (or one repeat of it) as a task.

A golden answer that is not a bracketed JSON list is refused when the file is read, not
scored 0 case after case.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.benchmarks.geoktools.scoring import golden_list
from evalnb.core.data import json_records, require

K_VALUES = (1, 2, 3, 4)


@dataclass(frozen=True)
class GeoCase:
    task_id: str         # case id, or "id#rN" for repeat N when repeats > 1
    case_id: str
    repeat: int
    query: str
    golden: str
    k: int
    snapshot_date: str


def read_cases(path: Path) -> list[dict[str, Any]]:
    cases = []
    for where, raw, case_id in json_records(path, "cases"):
        k = require(raw, "K", int, where)
        if k not in K_VALUES:
            raise where.error(f"K must be one of {K_VALUES}, got {k}", "K")
        golden = require(raw, "golden_answer_raw", str, where)
        try:
            golden_list(golden)   # refused now, not scored 0 case after case
        except ValueError as e:
            raise where.error(str(e), "golden_answer_raw") from None
        cases.append({"id": case_id, "query": require(raw, "query", str, where),
                      "golden": golden, "K": k,
                      "snapshot_date": require(raw, "snapshot_date", str, where)})
    return cases
