"""Contestant repeats on WildTrace: ``repeats: K`` draws K answers per task, each
judged by the full panel. Optional and off by default: the protocol has one answer per task,
and with ``K = 1`` (or the key absent) every record, key, number and file is what it is without
this module.

The decisions, for K > 1 (docs/protocols/wildtrace.md, "Contestant repeats"):

- **Keys.** Repeat 1 of a task is the call ``task_id`` (today's key), repeat n > 1 is
  ``task_id#n``; its judges' calls are ``<that key>::<role>``. Every record of a repeated run
  carries ``repeat`` (1-based). K is part of the fingerprint, so resuming a run with another K
  is refused (the researcher starts a new run: a K-answer mean and a K'-answer mean are
  different numbers, and silently adding answers to a finished run would change them).
- **Out of context** is decided once by the document's length, so every repeat of such a task
  is ``out_of_context`` (no call) and scores 0.
- **A repeat's score** is the protocol's task score of that answer: the
  panel mean when it was answered ``ok`` and every judge succeeded on it, 0 for a final non-ok
  answer, None while resumable. **A task's score** is the mean over its K repeats, once all
  are final.
- **The headline numbers** are means over tasks of the per-task mean over repeats
  (``all_tasks``: every repeat counts, non-ok as 0; ``scored``: each task with a scored repeat
  counts once, with the mean of its scored repeats). They are *not* the protocol's
  single-answer numbers, and every label says so. Every interval and standard error resamples
  tasks with all their repeats (the item is the unit: Miller 2024 §4).
- **A task's status** is ``ok`` when some repeat was answered ok; else the status of its first
  resumable repeat (``failed_transient`` or ``pending``), if any; else repeat 1's. Each
  repeat's own status is on the task's row (``repeats``), and their counts in
  ``repeats.answer_status_counts``.
- **Imported answers** (``responses:``) hold one answer per task: ``repeats`` > 1 with them is
  refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from evalnb.core.data import Where
from evalnb.stats.power import within_item_variance
from evalnb.core.run_config import QuietDefault, RunConfig
from evalnb.core.types import Status

DEFAULT = QuietDefault(1)   # left out of config.json while in force: K = 1 records what it always did
RESUMABLE = (Status.FAILED_TRANSIENT, Status.PENDING)


def check_repeats(config: RunConfig, has_imported: bool, task_ids: Sequence[str]) -> int:
    """``repeats``: a positive integer (default 1); refused with imported answers; every
    repeat's key distinct from every task's."""
    k = config.options.get("repeats", DEFAULT.value)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise config.error("repeats", f"expected a positive integer, got {k!r}")
    if k > 1 and has_imported:
        raise config.error("repeats", "an imported responses file holds one answer per task: "
                                      "repeats must be 1 with responses:")
    if k > 1:
        ids = set(task_ids)
        for task_id in task_ids:
            clash = next((key for n in range(2, k + 1) if (key := repeat_key(task_id, n)) in ids), None)
            if clash is not None:
                raise Where(str(config.data), task=clash).error(
                    f"the task id is also the key of repeat {clash.rsplit('#', 1)[1]} of task {task_id!r}: "
                    "rename it to run with repeats", "task_id")
    return k


def summary(k: int) -> str:
    return (f"{k} answers per task, each judged by the full panel (not the protocol, which has one): "
            "the headline numbers are means over tasks of each task's mean over its answers")


def repeat_key(task_id: str, n: int) -> str:
    """The generate call's key of repeat ``n`` (1-based): repeat 1 keeps the task id."""
    return task_id if n == 1 else f"{task_id}#{n}"


def repeat_fields(n: int, k: int) -> dict[str, Any]:
    """What a record of repeat ``n`` carries beyond today's fields (nothing when K = 1)."""
    return {"repeat": n} if k > 1 else {}


def task_status(statuses: Sequence[str]) -> str:
    """A repeated task's status (module doc)."""
    if Status.OK in statuses:
        return Status.OK.value
    return next((s for s in statuses if s in RESUMABLE), statuses[0])


def task_mean(scores: Sequence[float | None]) -> float | None:
    """The task's score: the mean over its repeats, once every repeat has one."""
    if any(s is None for s in scores):
        return None
    return sum(scores) / len(scores)  # type: ignore[arg-type]


def repeated_row(answers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The fields of a task's row that differ with K > 1, from its answers (one per repeat:
    ``status``, ``score``, ``judges``): the task's status and score, every verdict (each with its
    ``repeat``) and each repeat's own status and score."""
    statuses = [a["status"] for a in answers]
    return {
        "status": task_status(statuses),
        "score": task_mean([a["score"] for a in answers]),
        "judges": [dict(v, repeat=n) for n, a in enumerate(answers, 1) for v in a["judges"]],
        "repeats": [{"repeat": n, "status": a["status"], "score": a["score"]} for n, a in enumerate(answers, 1)],
    }


def repeat_values(rows: Sequence[Mapping[str, Any]], k: int, nan: float) -> list[list[float]]:
    """The repeats x tasks matrix: a repeat's score where it was answered ok and scored, NaN
    elsewhere (the metrics count NaN as 0 in ``all_tasks``, leave it out of ``scored``)."""
    values = [[nan] * len(rows) for _ in range(k)]
    for j, row in enumerate(rows):
        for answer in row["repeats"]:
            if answer["status"] == Status.OK and answer["score"] is not None:
                values[answer["repeat"] - 1][j] = answer["score"]
    return values


def judge_means(row: Mapping[str, Any]) -> dict[str, float]:
    """Each judge's mean score over the repeats it scored (for agreement, per task)."""
    per_judge: dict[str, list[float]] = {}
    for v in row["judges"]:
        if v["score"] is not None:
            per_judge.setdefault(f"{v['judge']} {v['model']}", []).append(v["score"])
    return {label: sum(s) / len(s) for label, s in per_judge.items()}


LABEL_SUFFIX = " (mean over tasks of each task's mean over {k} answers: not the protocol's single-answer number)"


def repeats_block(rows: Sequence[Mapping[str, Any]], k: int, values: Sequence[Sequence[float]],
                  body: dict[str, Any]) -> dict[str, Any]:
    """scores.json ``repeats``, and the within-item variance beside each headline metric's
    standard errors (``uncertainty.metrics.<name>``); the headline labels say what they are."""
    for name in ("all_tasks", "scored"):
        body["metrics"][name]["label"] += LABEL_SUFFIX.format(k=k)
    body["metrics"]["coverage"]["label"] = f"share of answers scored (tasks x {k} repeats)"
    final = [[0.0 if v != v else v for v in row] for row in values]   # all_tasks: non-ok repeats count 0
    complete = [j for j, row in enumerate(rows) if row["score"] is not None]
    spreads = {"all_tasks": within_item_variance([[r[j] for j in complete] for r in final]),
               "scored": within_item_variance(values)}
    for name, (variance, n_items) in spreads.items():
        entry = (body.get("uncertainty") or {}).get("metrics", {}).get(name)
        if entry is not None:
            entry |= {"repeats": k, "within_item_variance": variance, "within_item_n": n_items}
    return {
        "k": k,
        "note": f"{k} answers per task, each judged by the full panel; scored_overall and all_tasks_overall "
                "are means over tasks of each task's mean over its answers, not the protocol's "
                "single-answer numbers; every interval resamples tasks with all their answers",
        "answer_status_counts": dict(Counter(a["status"] for row in rows for a in row["repeats"])),
        "within_item_variance": {name: {"value": v, "n_items": n} for name, (v, n) in spreads.items()},
    }
