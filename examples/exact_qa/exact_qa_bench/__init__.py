"""Exact-match QA: a benchmark of your own, outside evalnb (docs/architecture.md).

The contestant answers each question; the answer scores 1 when, normalised, it equals the
golden answer, else 0 (no judge). One metric, accuracy, with a seeded bootstrap interval.
A resumable failure leaves its question unscored and the run incomplete; a refusal, an
empty answer or a permanent failure scores 0.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evalnb.api import (BOOTSTRAP_OPTIONS, BaseBenchmark, Call, ChatRequest, Fact, ItemEvidence, ItemResults, Metric,
                        Passage, Prepared, Record, RunConfig, Where, cell_mean, metric_ci, metric_value, new_figure,
                        read_jsonl, record_id, require, score_or_nan, unique_ids)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from evalnb.api import ReportFigure

PROMPT = "Answer with the answer alone: no sentence, no explanation.\n\nQuestion: {question}"
SCORING = "exact_qa/1: lower case, punctuation and the articles a/an/the removed, spaces collapsed; 1 if equal"


@dataclass(frozen=True)
class Question:
    task_id: str
    question: str
    answer: str


def read_questions(path: Path) -> list[Question]:
    """One JSON object a line: {"id", "question", "answer"}; every error names the line and field."""
    found = []
    for line, raw in read_jsonl(path):
        if not isinstance(raw, dict):
            raise Where(str(path), line).error("expected an object {id, question, answer}")
        where = Where(str(path), line, record_id(raw, "id", Where(str(path), line)))
        found.append((Question(str(where.task), require(raw, "question", str, where),
                               require(raw, "answer", str, where)), where))
    if not found:
        raise Where(str(path)).error("no questions")
    unique_ids([(q.task_id, where) for q, where in found])
    return [q for q, _ in found]


def normalise(text: str) -> str:
    words = text.lower().translate(str.maketrans("", "", string.punctuation)).split()
    return " ".join(w for w in words if w not in ("a", "an", "the"))


def task_score(answer: str | None, golden: str) -> int:
    """The score rule: 1 when the normalised answer equals the normalised golden one, else 0."""
    return int(answer is not None and normalise(answer) == normalise(golden))


def _accuracy(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
    return cell_mean(values)


METRICS = (Metric("accuracy", "accuracy: share of questions answered exactly", _accuracy, headline=True),)


class ExactQA(BaseBenchmark):
    NAME: ClassVar[str] = "exact_qa"
    OPTIONS: ClassVar[Mapping[str, Any]] = {"max_tokens": 64, **BOOTSTRAP_OPTIONS}
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ()
    # not the contestant; the shared part (retry policy, panel, declared prompts, the questions) is checked too
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = ("prompt", "scoring")
    STATUSES: ClassVar[tuple[str, ...]] = ("ok", "empty", "refused", "failed_permanent", "failed_transient",
                                           "pending")
    ITEM: ClassVar[type] = Question
    ITEM_NOUN: ClassVar[str] = "question"
    FIGURE: ClassVar[str] = "accuracy"

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.positive_int("max_tokens")
        self.check_bootstrap()
        if config.judges:
            self.warnings.append("exact_qa scores by exact match: the configured judges are not called")
        self.tasks = read_questions(config.data)

    def fingerprint_parts(self) -> dict[str, Any]:
        model = self.config.model
        # Only this benchmark's own parts: the questions are hashed into the shared part.
        return {"prompt": PROMPT, "scoring": SCORING, "contestant": {"provider": model.provider, "name": model.name}}

    def generation_calls(self) -> list[Call]:
        request = functools.partial(ChatRequest, max_tokens=self.config.options["max_tokens"], temperature=0.0)
        return [Call(q.task_id, "model", functools.partial(Prepared, request(PROMPT.format(question=q.question)),
                                                           {"task_id": q.task_id})) for q in self.tasks]

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        return []   # the score rule needs no call: score() applies it

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        rows = []
        for q in self.tasks:
            r = responses.get(q.task_id) or {"status": "pending", "text": None}
            done = r["status"] != "pending" and self.generation_done(r)   # failed_transient: resumable, not 0
            rows.append({"task_id": q.task_id, "status": r["status"], "golden": q.answer, "answer": r["text"],
                         "score": task_score(r["text"] if r["status"] == "ok" else None, q.answer) if done else None})
        pending = sum(row["score"] is None for row in rows)
        body = self.with_metrics({"complete": not pending, "n": len(rows), "tasks": rows})
        return body | {"resumable": {"generation_calls": pending}, "tasks": body.pop("tasks")}   # rows last

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        return [ItemEvidence(row["task_id"], row["status"], row["score"], {}, (
            Passage("question", q.question), Fact("golden answer", q.answer), Passage("answer", row["answer"]),
            Fact("normalised", f"{normalise(row['answer'] or '')!r} vs {normalise(q.answer)!r}")))
            for q, row in zip(self.tasks, scores["tasks"])]

    @classmethod
    def metrics(cls) -> tuple[Metric, ...]:
        return METRICS

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        rows = scores["tasks"]
        return ItemResults(ids=tuple(r["task_id"] for r in rows), values=[[score_or_nan(r["score"]) for r in rows]],
                           scores={r["task_id"]: r["score"] for r in rows},
                           statuses={r["task_id"]: r["status"] for r in rows},
                           attempted={r["task_id"]: r["status"] != "pending" for r in rows})

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """Questions and their mean score, by the answer's status."""
        import pandas as pd

        rows = pd.DataFrame(scores["tasks"], columns=["status", "score"])
        return rows.groupby("status")["score"].agg(["count", "mean"])

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        fig = new_figure((4, 3))
        ax = fig.subplots()
        value, ci = metric_value(scores, "accuracy"), metric_ci(scores, "accuracy") or {}
        if value is not None and ci.get("low") is not None:
            ax.bar(["accuracy"], [value], yerr=[[value - ci["low"]], [ci["high"] - value]], capsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"exact-match accuracy, 95% bootstrap CI (n={scores['n']})")
        return fig
