"""WildTrace's tasks: both released representations, checked field by field as they load.

Nested ``.json`` (a list, or ``{"tasks": [...]}``) and Hugging Face ``.jsonl`` (one task per
line, ``ground_truth`` serialised JSON). An error names the file, the line or task, and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.core.data import Where, json_records, read_jsonl, require, unique_ids


@dataclass(frozen=True)
class RubricItem:
    points: float
    criterion: str


@dataclass(frozen=True)
class WildTraceTask:
    task_id: str
    question: str
    corpus_file: str
    rubric: tuple[RubricItem, ...]

    @property
    def max_points(self) -> float:
        return sum(item.points for item in self.rubric)


# --- loading -----------------------------------------------------------------------------

def _task(raw: Any, where: Where) -> WildTraceTask:
    if not isinstance(raw, dict):
        raise where.error("expected a task object")
    task_id = require(raw, "task_id", str, where)
    where = Where(where.source, where.line, task_id)
    ground_truth = require(raw, "ground_truth", object, where)
    if isinstance(ground_truth, str):   # the Hugging Face .jsonl serialises it
        try:
            ground_truth = json.loads(ground_truth)
        except json.JSONDecodeError as e:
            raise where.error(f"not valid serialised JSON ({e.msg})", "ground_truth") from None
    if not isinstance(ground_truth, dict):
        raise where.error("expected an object (or its JSON serialisation)", "ground_truth")
    rubric_raw = require(ground_truth, "scoring_rubric", list, where, path="ground_truth.scoring_rubric")
    if not rubric_raw:
        raise where.error("empty rubric", "ground_truth.scoring_rubric")
    rubric = []
    for i, item in enumerate(rubric_raw):
        path = f"ground_truth.scoring_rubric[{i}]"
        points = require(item, "points", float, where, path=f"{path}.points")
        if points < 0:
            raise where.error("negative points", f"{path}.points")
        rubric.append(RubricItem(points, require(item, "correct_criterion", str, where,
                                                 path=f"{path}.correct_criterion")))
    if sum(item.points for item in rubric) <= 0:
        raise where.error("rubric points sum to zero", "ground_truth.scoring_rubric")
    return WildTraceTask(task_id, require(raw, "question_text", str, where),
                         require(raw, "corpus_file", str, where), tuple(rubric))


def read_tasks(path: Path) -> list[WildTraceTask]:
    """Both released representations: nested ``.json`` (a list, or ``{"tasks": [...]}``)
    and Hugging Face ``.jsonl`` (one task per line, ``ground_truth`` serialised JSON)."""
    source = str(path)
    if path.suffix != ".jsonl":
        return [_task(raw, where) for where, raw, _ in json_records(path, "tasks", "task_id")]
    pairs = [(_task(obj, Where(source, line)), Where(source, line)) for line, obj in read_jsonl(path)]
    if not pairs:
        raise Where(source).error("no tasks")
    unique_ids([(t.task_id, w) for t, w in pairs])
    return [t for t, _ in pairs]
