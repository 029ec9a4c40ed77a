"""Two-turn conversations rated by a judge (in the style of MT-Bench): a benchmark of your own.

Each question has two user turns. Turn 1 is sent alone; turn 2 is sent after it, with the
model's own turn-1 answer in the history as an assistant turn (a chained call: the framework
sends it once turn 1 is recorded, in the same run). Each judge rates each turn from 1 to 10 and
replies ``Rating: [[N]]``; for turn 2 it sees the whole conversation. A reply without exactly
one such rating in 1..10 is a judge failure (``failed_parse``): resumable, never a zero.

A turn that was refused, empty or failed for good has no rating (no judge call); its item is
scored on what it has, and a turn 2 whose turn 1 has no answer is never sent: it is recorded
with turn 1's status, since the conversation cannot go on without it.

Per question: ``t1`` and ``t2``, each turn's rating averaged over the judges; the item's score
is their mean. Metrics, each with its seeded bootstrap interval over questions: ``score``
(headline), ``turn_1`` and ``turn_2``.

It imports only ``evalnb.api``, the public benchmark API (docs/benchmark-api.md).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from evalnb.api import (BOOTSTRAP_OPTIONS, NAN, BaseBenchmark, Call, ChatRequest, Fact, ItemEvidence, ItemResults,
                        JudgeReplyError, Metric, Passage, Prepared, Record, RunConfig, Table, Turn, Where, chained,
                        channel_mean, interpreter, metric_value, new_figure, read_jsonl, record_id, require,
                        unique_ids)

if TYPE_CHECKING:
    import pandas as pd

    from evalnb.api import ReportFigure

JUDGE_PROMPT = """Please act as an impartial judge and rate the quality of the assistant's answer to the user's
last question in the conversation below, on a scale of 1 to 10. Be as objective as possible.
After a short explanation, give your rating strictly in this format: "Rating: [[N]]".

{conversation}"""
GRADING = "two_turn/1: each turn rated 1-10 by each judge, Rating: [[N]]; an item's score is the mean of its turns"
_RATING = re.compile(r"Rating:\s*\[\[(\d+(?:\.\d+)?)\]\]")
TURNS = ("t1", "t2")
NOT_ANSWERED = ("refused", "empty", "failed_permanent")


@dataclass(frozen=True)
class Conversation:
    task_id: str
    category: str
    turns: tuple[str, str]


def read_conversations(path: Path) -> list[Conversation]:
    """One JSON object a line: {"id", "category", "turns": [turn 1, turn 2]}; errors name line and field."""
    found = []
    for line, raw in read_jsonl(path):
        if not isinstance(raw, dict):
            raise Where(str(path), line).error("expected an object {id, category, turns}")
        where = Where(str(path), line, record_id(raw, "id", Where(str(path), line)))
        turns = require(raw, "turns", list, where)
        if len(turns) != 2 or not all(isinstance(t, str) and t.strip() for t in turns):
            raise where.error("turns: expected two non-empty strings", field="turns")
        found.append((Conversation(str(where.task), require(raw, "category", str, where), (turns[0], turns[1])), where))
    if not found:
        raise Where(str(path)).error("no conversations")
    unique_ids([(c.task_id, where) for c, where in found])
    return [c for c, _ in found]


def read_rating(reply: str) -> tuple[float, Mapping[str, Any]]:
    """The one ``Rating: [[N]]`` in a judge's reply, N from 1 to 10; else JudgeReplyError."""
    found = {float(n) for n in _RATING.findall(reply)}
    if len(found) != 1 or not 1 <= next(iter(found)) <= 10:
        raise JudgeReplyError(f"expected one rating 'Rating: [[N]]' with N from 1 to 10, found "
                              f"{', '.join(f'{n:g}' for n in sorted(found)) or 'none'}")
    rating = found.pop()
    return rating, {"rating": rating}


def conversation_text(turns: list[tuple[str, str]]) -> str:
    return "\n\n".join(f"### {'User' if role == 'user' else 'Assistant'}:\n{text}" for role, text in turns)


def turn_key(task_id: str, turn: str) -> str:
    return f"{task_id}::{turn}"


METRICS = (
    Metric("score", "score: mean rating of both turns (1-10)", channel_mean("score"), headline=True,
           channels=("score",)),
    Metric("turn_1", "turn 1: mean rating of the first turn", channel_mean("t1"), channels=("t1",)),
    Metric("turn_2", "turn 2: mean rating of the second turn, with the model's own first answer in the history",
           channel_mean("t2"), channels=("t2",)),
)


class TwoTurn(BaseBenchmark):
    NAME: ClassVar[str] = "two_turn"
    OPTIONS: ClassVar[Mapping[str, Any]] = {"max_tokens": 256, "judge_max_tokens": 256, **BOOTSTRAP_OPTIONS}
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ()
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = ("grading",)
    PROMPTS: ClassVar[Mapping[str, str]] = {"judge": JUDGE_PROMPT}
    ITEM: ClassVar[type] = Conversation
    ITEM_NOUN: ClassVar[str] = "conversation"
    FIGURE: ClassVar[str] = "ratings"
    METRICS: ClassVar[tuple[Metric, ...]] = METRICS

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        self.positive_int("max_tokens")
        self.positive_int("judge_max_tokens")
        self.check_bootstrap()
        if not config.judges:
            raise config.error("judges", "two_turn needs at least one judge")
        self.tasks = read_conversations(config.data)

    def fingerprint_parts(self) -> dict[str, Any]:
        model = self.config.model
        return {"grading": GRADING, "contestant": {"provider": model.provider, "name": model.name,
                                                   "max_tokens": self.config.options["max_tokens"]},
                "judge_max_tokens": self.config.options["judge_max_tokens"]}

    def generation_calls(self) -> list[Call]:
        """Turn 1 of every conversation, and turn 2 chained on it: sent once turn 1 is recorded."""
        calls = []
        for c in self.tasks:
            first = turn_key(c.task_id, "t1")
            request = ChatRequest(c.turns[0], max_tokens=self.config.options["max_tokens"], temperature=0.0)
            calls.append(Call(first, "model", functools.partial(Prepared, request, {"task_id": c.task_id, "turn": 1})))
            calls.append(chained(turn_key(c.task_id, "t2"), "model", (first,),
                                 functools.partial(self._second_turn, c, first)))
        return calls

    def _second_turn(self, c: Conversation, first: str, records: Mapping[str, Record]) -> Prepared:
        answer = records[first]
        fields = {"task_id": c.task_id, "turn": 2}
        if answer["status"] != "ok":   # no conversation to go on with: recorded, never sent
            return Prepared(None, fields | {"status": answer["status"], "text": None,
                                            "reason": "turn 1 has no answer"})
        history = (Turn("user", c.turns[0]), Turn("assistant", answer["text"]))
        return Prepared(ChatRequest(c.turns[1], max_tokens=self.config.options["max_tokens"], temperature=0.0,
                                    history=history), fields)

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        calls = []
        for c in self.tasks:
            answers = [responses.get(turn_key(c.task_id, t)) for t in TURNS]
            for n, turn in enumerate(TURNS):
                if any(a is None or a["status"] != "ok" for a in answers[: n + 1]):
                    continue   # a turn is rated with every answer up to it
                shown = [(role, text) for i in range(n + 1)
                         for role, text in (("user", c.turns[i]), ("assistant", answers[i]["text"]))]  # type: ignore[index]
                prompt = JUDGE_PROMPT.format(conversation=conversation_text(shown))
                for role, judge in self.config.judge_roles():
                    request = ChatRequest(prompt, max_tokens=self.config.options["judge_max_tokens"], temperature=0.0)
                    fields = {"task_id": c.task_id, "turn": n + 1, "judge": role, "judge_model": judge.name}
                    calls.append(Call(f"{c.task_id}::{turn}::{role}", role, functools.partial(Prepared, request, fields),
                                      interpreter(read_rating, who=f"judge {role}")))
        return calls

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        rows, pending = [], {"generation": 0, "judge_calls": 0}
        roles = [role for role, _ in self.config.judge_roles()]
        for c in self.tasks:
            row: dict[str, Any] = {"task_id": c.task_id, "category": c.category, "ratings": {}}
            statuses = []
            for turn in TURNS:
                answer = responses.get(turn_key(c.task_id, turn)) or {"status": "pending", "text": None}
                statuses.append(answer["status"])
                row[f"{turn}_answer"] = answer["text"]
                if answer["status"] in NOT_ANSWERED:
                    row[turn] = None
                    continue
                if answer["status"] != "ok":
                    pending["generation"] += 1
                    row[turn] = None
                    continue
                got = {r: (judgements.get(f"{c.task_id}::{turn}::{r}") or {}) for r in roles}
                ratings = {r: v["rating"] for r, v in got.items() if v.get("status") == "ok"}
                pending["judge_calls"] += len(roles) - len(ratings)
                row["ratings"][turn] = ratings
                row[turn] = sum(ratings.values()) / len(ratings) if len(ratings) == len(roles) else None
            row["status"] = next((s for s in statuses if s != "ok"), "ok")
            rated = [row[t] for t in TURNS if row[t] is not None]
            row["score"] = sum(rated) / len(rated) if rated and all(
                row[t] is not None or s in NOT_ANSWERED for t, s in zip(TURNS, statuses)) else None
            rows.append(row)
        body = self.with_metrics({"complete": not any(pending.values()), "n": len(rows), "tasks": rows})
        return body | {"resumable": pending, "tasks": body.pop("tasks")}

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        items = []
        for c, row in zip(self.tasks, scores["tasks"]):
            ratings = tuple((turn, role, f"{v:g}") for turn, per in row["ratings"].items() for role, v in per.items())
            judges = {role: v for per in row["ratings"].values() for role, v in per.items()}
            items.append(ItemEvidence(row["task_id"], row["status"], row["score"], judges,
                                      (Fact("category", c.category), Passage("turn 1", c.turns[0]),
                                       Passage("answer 1", row["t1_answer"]), Passage("turn 2", c.turns[1]),
                                       Passage("answer 2", row["t2_answer"]),
                                       Table("ratings", ("turn", "judge", "rating"), ratings))))
        return items

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        rows = scores["tasks"]

        def channel(name: str) -> list[list[float]]:
            return [[NAN if r[name] is None else float(r[name]) for r in rows]]

        return ItemResults(ids=tuple(r["task_id"] for r in rows), values=channel("score"),
                           scores={r["task_id"]: r["score"] for r in rows},
                           statuses={r["task_id"]: r["status"] for r in rows},
                           attempted={r["task_id"]: r["status"] == "ok" for r in rows},
                           channels={"score": channel("score"), "t1": channel("t1"), "t2": channel("t2")})

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """Mean rating by category and turn."""
        import pandas as pd

        table = pd.DataFrame([(r["category"], r["t1"], r["t2"]) for r in scores["tasks"]],
                             columns=["category", "turn 1", "turn 2"])
        return table.groupby("category").mean()

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        fig = new_figure((5, 3))
        ax = fig.subplots()
        names = [m.name for m in METRICS]
        ax.bar(range(len(names)), [metric_value(scores, n) or 0.0 for n in names], color="#4c72b0")
        ax.set_xticks(range(len(names)), names)
        ax.set_ylim(0, 10.5)
        ax.set_title(f"mean rating (n={scores['n']})")
        return fig
