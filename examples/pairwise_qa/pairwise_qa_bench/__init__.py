"""Answers judged against a fixed baseline's, in both orders (in the style of Arena-Hard).

The contestant answers each question; each judge then compares its answer with the baseline
answer the data file holds, twice: game 1 with the contestant as answer A, game 2 with it as
answer B. The judge replies with one verdict, ``[[A>>B]]`` ... ``[[B>>A]]``; a reply without
exactly one is a judge failure (``failed_parse``), resumable, never a tie. Each game is read
from the contestant's side and scores a win 1, a tie 0.5, a loss 0.

Per question: ``win`` (the mean over its games, every judge's two) and ``consistent`` (1.0 when
each judge's two orders agree on the winner). Metrics: ``win_rate`` (headline: the share of
games won against the baseline, items resampled whole with both their games) and
``consistency``. A refused, empty or failed answer loses both games without a judge call.

It imports only ``evalnb.api``, the public benchmark API (docs/benchmark-api.md).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evalnb.api import (BOOTSTRAP_OPTIONS, NAN, WIN_SCORE, BaseBenchmark, Call, ChatRequest, ItemEvidence,
                        ItemResults, Metric, Passage, Prepared, Record, RunConfig, Table, Where, channel_mean,
                        contestant_label, interpreter, metric_value, new_figure, read_jsonl, read_verdict, record_id,
                        require, unique_ids)

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.api import ReportFigure

JUDGE_PROMPT = """Please act as an impartial judge and compare the two answers to the user's question below.
Reply with your verdict as one label: [[A>>B]] (A is much better), [[A>B]], [[A=B]], [[B>A]] or [[B>>A]].

Question: {question}

[Answer A]
{a}

[Answer B]
{b}"""
GRADING = "pairwise_qa/1: two games per judge, the contestant as A then as B; a win 1, a tie 0.5, a loss 0"
GAMES = (("g1", True), ("g2", False))   # (key suffix, the contestant is answer A)
NOT_ANSWERED = ("refused", "empty", "failed_permanent")


@dataclass(frozen=True)
class Question:
    task_id: str
    question: str
    baseline: str


def read_questions(path: Path) -> list[Question]:
    """One JSON object a line: {"id", "question", "baseline"}; every error names the line and field."""
    found = []
    for line, raw in read_jsonl(path):
        if not isinstance(raw, dict):
            raise Where(str(path), line).error("expected an object {id, question, baseline}")
        where = Where(str(path), line, record_id(raw, "id", Where(str(path), line)))
        found.append((Question(str(where.task), require(raw, "question", str, where),
                               require(raw, "baseline", str, where)), where))
    if not found:
        raise Where(str(path)).error("no questions")
    unique_ids([(q.task_id, where) for q, where in found])
    return [q for q, _ in found]


def verdict_of(reply: str) -> tuple[float, Mapping[str, Any]]:
    """The verdict label as the judge gave it (by position, not yet from the contestant's side);
    the verdict's score is answer A's: 1 a win, 0.5 a tie, 0 a loss."""
    label = read_verdict(reply)
    return WIN_SCORE[label], {"verdict": label}


METRICS = (
    Metric("win_rate", "win rate: share of games won against the baseline (a tie half)", channel_mean("win"),
           headline=True, channels=("win",)),
    Metric("consistency", "consistency: share of questions whose two orders agree", channel_mean("consistent"),
           channels=("consistent",)),
)


class PairwiseQA(BaseBenchmark):
    NAME: ClassVar[str] = "pairwise_qa"
    OPTIONS: ClassVar[Mapping[str, Any]] = {"max_tokens": 512, "judge_max_tokens": 256, **BOOTSTRAP_OPTIONS}
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ()
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = ("grading",)
    PROMPTS: ClassVar[Mapping[str, str]] = {"judge": JUDGE_PROMPT}
    ITEM: ClassVar[type] = Question
    ITEM_NOUN: ClassVar[str] = "question"
    FIGURE: ClassVar[str] = "win_rate"
    METRICS: ClassVar[tuple[Metric, ...]] = METRICS

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.positive_int("max_tokens")
        self.positive_int("judge_max_tokens")
        self.check_bootstrap()
        if not config.judges:
            raise config.error("judges", "pairwise_qa needs at least one judge")
        self.tasks = read_questions(config.data)

    def fingerprint_parts(self) -> dict[str, Any]:
        model = self.config.model
        return {"grading": GRADING, "contestant": {"provider": model.provider, "name": model.name,
                                                   "max_tokens": self.config.options["max_tokens"]},
                "judge_max_tokens": self.config.options["judge_max_tokens"]}

    def generation_calls(self) -> list[Call]:
        return [Call(q.task_id, "model", functools.partial(
            Prepared, ChatRequest(q.question, max_tokens=self.config.options["max_tokens"], temperature=0.0),
            {"task_id": q.task_id})) for q in self.tasks]

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        calls = []
        for q in self.tasks:
            response = responses.get(q.task_id)
            if response is None or response["status"] != "ok":
                continue
            for game, contestant_is_a in GAMES:
                a, b = (response["text"], q.baseline) if contestant_is_a else (q.baseline, response["text"])
                request = ChatRequest(JUDGE_PROMPT.format(question=q.question, a=a, b=b),
                                      max_tokens=self.config.options["judge_max_tokens"], temperature=0.0)
                for role, judge in self.config.judge_roles():
                    fields = {"task_id": q.task_id, "game": game, "judge": role, "judge_model": judge.name}
                    calls.append(Call(f"{q.task_id}::{game}::{role}", role, functools.partial(Prepared, request, fields),
                                      interpreter(verdict_of, who=f"judge {role}")))
        return calls

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        rows, pending = [], {"generation": 0, "judge_calls": 0}
        roles = [role for role, _ in self.config.judge_roles()]
        for q in self.tasks:
            response = responses.get(q.task_id) or {"status": "pending", "text": None}
            row: dict[str, Any] = {"task_id": q.task_id, "status": response["status"], "answer": response["text"],
                                   "games": {}, "win": None, "consistent": None}
            if response["status"] in NOT_ANSWERED:   # loses both games, no call
                row.update(win=0.0, consistent=1.0)
            elif response["status"] != "ok":
                pending["generation"] += 1
            else:
                games = {}
                for role in roles:
                    for game, contestant_is_a in GAMES:
                        record = judgements.get(f"{q.task_id}::{game}::{role}") or {}
                        if record.get("status") == "ok":
                            games[f"{game}::{role}"] = contestant_label(record["verdict"], contestant_is_a)
                pending["judge_calls"] += 2 * len(roles) - len(games)
                row["games"] = games
                if len(games) == 2 * len(roles):
                    row["win"] = sum(WIN_SCORE[g] for g in games.values()) / len(games)
                    row["consistent"] = sum(WIN_SCORE[games[f"g1::{r}"]] == WIN_SCORE[games[f"g2::{r}"]]
                                            for r in roles) / len(roles)
            row["score"] = row["win"]
            rows.append(row)
        body = self.with_metrics({"complete": not any(pending.values()), "n": len(rows), "tasks": rows})
        return body | {"resumable": pending, "tasks": body.pop("tasks")}

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        return [ItemEvidence(row["task_id"], row["status"], row["score"], {},
                             (Passage("question", q.question), Passage("answer", row["answer"]),
                              Passage("baseline", q.baseline),
                              Table("games (from the contestant's side)", ("game", "verdict"),
                                    tuple(row["games"].items()))))
                for q, row in zip(self.tasks, scores["tasks"])]

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        rows = scores["tasks"]

        def channel(name: str) -> list[list[float]]:
            return [[NAN if r[name] is None else float(r[name]) for r in rows]]

        return ItemResults(ids=tuple(r["task_id"] for r in rows), values=channel("win"),
                           scores={r["task_id"]: r["score"] for r in rows},
                           statuses={r["task_id"]: r["status"] for r in rows},
                           attempted={r["task_id"]: r["status"] == "ok" for r in rows},
                           channels={"win": channel("win"), "consistent": channel("consistent")})

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """Verdicts from the contestant's side, by game."""
        import pandas as pd

        rows = [(key.split("::")[0], label) for r in scores["tasks"] for key, label in r["games"].items()]
        table = pd.DataFrame(rows, columns=["game", "verdict"])
        return table.groupby(["game", "verdict"]).size().unstack(fill_value=0)

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        fig = new_figure((4, 3))
        ax = fig.subplots()
        ax.bar([0], [metric_value(scores, "win_rate") or 0.0], color="#4c72b0")
        ax.axhline(0.5, color="grey", linestyle=":")
        ax.set_xticks([0], ["win rate vs baseline"])
        ax.set_ylim(0, 1)
        return fig
