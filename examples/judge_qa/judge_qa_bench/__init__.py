"""Judge-graded short-answer QA: a benchmark of your own, outside evalnb (docs/architecture.md).

The contestant answers each question in a few words. A grader LLM (each configured judge)
reads the question, the gold answer and the prediction and replies with one grade:
``CORRECT``, ``INCORRECT`` or ``NOT_ATTEMPTED``. A reply that holds no single grade is a
judge failure (``failed_parse``): resumable, asked again on the next run, never a zero.

Per question, two channels: ``correct`` (the share of judges grading it correct) and
``attempted`` (the share grading it correct or incorrect); with one judge, each is 1.0 or
0.0. A refused or empty answer, or one that failed for good, is not attempted (no judge
call). The metrics, each with its seeded bootstrap interval:

- ``correct``: correct answers over all questions;
- ``correct_given_attempted``: correct answers over attempted ones, a ratio of sums;
- ``f_score``: the harmonic mean of the two (0 when nothing was attempted);
- ``attempted``: attempted questions over all questions.

It imports only ``evalnb.api``, the public benchmark API (docs/benchmark-api.md).
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evalnb.api import (BOOTSTRAP_OPTIONS, NAN, BaseBenchmark, Call, ChatRequest, Fact, ItemEvidence, ItemResults,
                        JudgeReplyError, Metric, Passage, Prepared, Record, RunConfig, Table, Where, channel_mean,
                        interpreter, metric_ci, metric_value, new_figure, ratio, read_jsonl, record_id, require,
                        unique_ids)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from evalnb.api import ReportFigure

ANSWER_PROMPT = ("Answer the question in as few words as possible. If you do not know, say \"I don't know\".\n\n"
                 "Question: {question}")
GRADER_PROMPT = """Grade a predicted answer against the gold answer.

Question: {question}
Gold answer: {gold}
Predicted answer: {prediction}

CORRECT: the prediction gives the gold answer (other wording, or more detail that does not contradict it, is fine).
INCORRECT: the prediction gives another answer, or contradicts the gold answer.
NOT_ATTEMPTED: the prediction does not try to answer (a refusal, "I don't know").

Reply with the grade alone: CORRECT, INCORRECT or NOT_ATTEMPTED."""
GRADES = ("correct", "incorrect", "not_attempted")
GRADING = "judge_qa/1: one grade per judge; correct and attempted are the shares of the judges' grades"
_GRADE = re.compile(r"\b(CORRECT|INCORRECT|NOT_ATTEMPTED)\b")
NOT_ANSWERED = ("refused", "empty", "failed_permanent")   # not attempted, without a judge call


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


def read_grade(reply: str) -> tuple[float, Mapping[str, Any]]:
    """The grade in a grader's reply: exactly one of the three grade words (in capitals, as the
    prompt asks), else JudgeReplyError. The verdict's score is 1.0 for correct, else 0.0."""
    found = set(_GRADE.findall(reply.translate(str.maketrans("", "", string.punctuation.replace("_", "")))))
    if len(found) != 1:
        raise JudgeReplyError(f"expected one grade of CORRECT, INCORRECT, NOT_ATTEMPTED, found "
                              f"{', '.join(sorted(found)) or 'none'}")
    grade = found.pop().lower()
    return float(grade == "correct"), {"grade": grade}


def item_channels(status: str, grades: list[str | None]) -> tuple[float | None, float | None]:
    """``(correct, attempted)`` of one question: None while it waits for an answer or a grade."""
    if status in NOT_ANSWERED:
        return 0.0, 0.0
    if status != "ok" or not grades or any(g is None for g in grades):
        return None, None
    return (sum(g == "correct" for g in grades) / len(grades),
            sum(g in ("correct", "incorrect") for g in grades) / len(grades))


def _f_score(values: np.ndarray, strata: Mapping[str, np.ndarray], *, correct: np.ndarray,
             attempted: np.ndarray) -> np.ndarray:
    import numpy as np

    share = channel_mean("correct")(values, strata, correct=correct)
    # Nothing attempted: nothing correct either, an F-score of 0 (correct given attempted is undefined).
    given = np.nan_to_num(ratio("correct", "attempted")(values, strata, correct=correct, attempted=attempted))
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(share + given > 0, 2 * share * given / np.where(share + given > 0,
                                                                                  share + given, 1.0), 0.0)
    return np.where(np.isnan(share), np.nan, out)


BOTH = ("correct", "attempted")
METRICS = (
    Metric("correct", "correct: share of all questions graded correct", channel_mean("correct"), headline=True,
           channels=("correct",)),
    Metric("correct_given_attempted", "correct given attempted: correct over attempted questions",
           ratio("correct", "attempted"), headline=True, channels=BOTH),
    Metric("f_score", "F-score: harmonic mean of correct and correct given attempted", _f_score, channels=BOTH),
    Metric("attempted", "attempted: share of questions the contestant tried to answer", channel_mean("attempted"),
           channels=("attempted",)),
)


class JudgeQA(BaseBenchmark):
    NAME: ClassVar[str] = "judge_qa"
    OPTIONS: ClassVar[Mapping[str, Any]] = {"max_tokens": 64, "judge_max_tokens": 16, **BOOTSTRAP_OPTIONS}
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ()
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = ("grading",)   # the shared part (panel, prompts, tasks) too
    STATUSES: ClassVar[tuple[str, ...]] = ("ok", "empty", "refused", "failed_permanent", "failed_transient",
                                           "pending")
    PROMPTS: ClassVar[Mapping[str, str]] = {"answer": ANSWER_PROMPT, "grader": GRADER_PROMPT}
    ITEM: ClassVar[type] = Question
    ITEM_NOUN: ClassVar[str] = "question"
    FIGURE: ClassVar[str] = "grades"
    METRICS: ClassVar[tuple[Metric, ...]] = METRICS

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.positive_int("max_tokens")
        self.positive_int("judge_max_tokens")
        self.check_bootstrap()
        if not config.judges:
            raise config.error("judges", "judge_qa needs at least one grader (a judge endpoint)")
        self.tasks = read_questions(config.data)

    def fingerprint_parts(self) -> dict[str, Any]:
        # Only this benchmark's own parts: the retry policy, the panel, the prompts and the
        # questions are in every fingerprint already (the shared part).
        model = self.config.model
        return {"grading": GRADING, "contestant": {"provider": model.provider, "name": model.name,
                                                   "max_tokens": self.config.options["max_tokens"]},
                "judge_max_tokens": self.config.options["judge_max_tokens"]}

    def generation_calls(self) -> list[Call]:
        request = functools.partial(ChatRequest, max_tokens=self.config.options["max_tokens"], temperature=0.0)
        return [Call(q.task_id, "model", functools.partial(
            Prepared, request(ANSWER_PROMPT.format(question=q.question)), {"task_id": q.task_id}))
            for q in self.tasks]

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        calls = []
        for q in self.tasks:
            response = responses.get(q.task_id)
            if response is None or response["status"] != "ok":   # only answers are graded
                continue
            prompt = GRADER_PROMPT.format(question=q.question, gold=q.answer, prediction=response["text"])
            for role, judge in self.config.judge_roles():
                request = ChatRequest(prompt, max_tokens=self.config.options["judge_max_tokens"], temperature=0.0)
                fields = {"task_id": q.task_id, "judge": role, "judge_model": judge.name}
                calls.append(Call(f"{q.task_id}::{role}", role, functools.partial(Prepared, request, fields),
                                  interpreter(read_grade, who=f"grader {role}")))
        return calls

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        rows, pending = [], {"generation": 0, "judge_calls": 0}
        for q in self.tasks:
            response = responses.get(q.task_id) or {"status": "pending", "text": None}
            status = response["status"]
            grades: dict[str, str | None] = {}
            if status == "ok":
                for role, _ in self.config.judge_roles():
                    verdict = judgements.get(f"{q.task_id}::{role}")
                    grades[role] = verdict["grade"] if verdict and verdict["status"] == "ok" else None
                pending["judge_calls"] += sum(g is None for g in grades.values())
            elif status not in NOT_ANSWERED:   # pending or failed_transient: resumable
                pending["generation"] += 1
            correct, attempted = item_channels(status, list(grades.values()))
            rows.append({"task_id": q.task_id, "status": status, "golden": q.answer, "answer": response["text"],
                         "grades": grades, "correct": correct, "attempted": attempted, "score": correct})
        body = self.with_metrics({"complete": not any(pending.values()), "n": len(rows), "tasks": rows})
        return body | {"resumable": pending, "tasks": body.pop("tasks")}   # the rows last

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        items = []
        for q, row in zip(self.tasks, scores["tasks"]):
            replies = [(role, grade or "-", (judgements.get(f"{q.task_id}::{role}") or {}).get("text") or "")
                       for role, grade in row["grades"].items()]
            items.append(ItemEvidence(row["task_id"], row["status"], row["score"],
                                      {role: float(g == "correct") if g else None for role, g in row["grades"].items()},
                                      (Passage("question", q.question), Fact("gold answer", q.answer),
                                       Passage("answer", row["answer"]),
                                       Table("grades", ("judge", "grade", "reply"), tuple(replies)))))
        return items

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        rows = scores["tasks"]

        def channel(name: str) -> list[list[float]]:
            return [[NAN if r[name] is None else float(r[name]) for r in rows]]

        return ItemResults(ids=tuple(r["task_id"] for r in rows), values=channel("correct"),
                           scores={r["task_id"]: r["score"] for r in rows},
                           statuses={r["task_id"]: r["status"] for r in rows},
                           attempted={r["task_id"]: r["attempted"] != 0.0 for r in rows},
                           judges={r["task_id"]: {role: float(g == "correct") for role, g in r["grades"].items()
                                                  if g is not None} for r in rows},
                           channels={"correct": channel("correct"), "attempted": channel("attempted")})

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """Grades by judge: how many questions each judge graded correct, incorrect, not attempted."""
        import pandas as pd

        rows = [(role, grade) for r in scores["tasks"] for role, grade in r["grades"].items() if grade]
        table = pd.DataFrame(rows, columns=["judge", "grade"])
        return table.groupby(["judge", "grade"]).size().unstack(fill_value=0).reindex(columns=list(GRADES),
                                                                                      fill_value=0)

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        fig = new_figure((5, 3))
        ax = fig.subplots()
        names = [m.name for m in METRICS]
        for x, name in enumerate(names):
            value, ci = metric_value(scores, name), metric_ci(scores, name) or {}
            if value is not None and ci.get("low") is not None:
                ax.bar([x], [value], yerr=[[value - ci["low"]], [ci["high"] - value]], capsize=6, color="#4c72b0")
        ax.set_xticks(range(len(names)), [n.replace("_given_", "\ngiven ") for n in names], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"graded short answers, 95% bootstrap CI (n={scores['n']})")
        return fig
