"""WildTrace: evidence-withheld long-document QA, judged by a three-judge panel.

Reference: the WildTrace protocol (spec §1-5) and spec README readings 1-11. The model
sees only the document and the question; a document longer than the model's cap is out of
context, scored 0 and sent to nobody; each judge grades against the points rubric; a task's
score is the panel mean once every judge has succeeded.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from typing import TYPE_CHECKING, ClassVar

from evalnb import prompts, stats
from evalnb.benchmarks.base import BOOTSTRAP_OPTIONS, NAN, BaseBenchmark, judge_table, offline_title
from evalnb.caps import caps_for, caps_table, route_for, unlisted_warning
from evalnb.config import RunConfig
from evalnb.data import Corpus, Where, json_records, read_jsonl, require, unique_ids
from evalnb.judging import interpreter, normalise, panel_mean, parse_total, points_awarded, reply_of
from evalnb.reasoning import reasoning_passages
from evalnb.types import (Call, ChatRequest, Fact, ItemEvidence, ItemResults, Metric, Passage, Prepared, Record,
                          Status, Table)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from evalnb.benchmarks import RunScores
    from evalnb.figures import ReportFigure

# Spec §2 and §4.
TEMPERATURE = 0.1
MAX_TOKENS = 8192
MAX_TOKENS_REASONING = 32768
JUDGE_MAX_TOKENS = 16384

# Reading 5: final statuses that score 0; only "ok" is judged; failed_transient is resumable.
ZERO_STATUSES = (Status.OUT_OF_CONTEXT, Status.REFUSED, Status.EMPTY, Status.FAILED_PERMANENT)
AGGREGATION_POLICY = (
    "wildtrace/1: judge score = total / sum(rubric points), clamped to [0,1]; task score = "
    "simple mean of all configured judges, only when all succeeded; Scored = mean over ok "
    "responses with a full-panel score; All = sum of task scores / tasks in the data file, "
    "missing/failed/out-of-context zero-filled; null while anything is resumable")


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


# --- fingerprint (reading 11) --------------------------------------------------------------

def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def decoding(config: RunConfig) -> dict[str, Any]:
    model = config.model
    return {
        "model": {"temperature": TEMPERATURE if model.send_temperature else None,
                  model.token_param: MAX_TOKENS_REASONING if model.reasoning else MAX_TOKENS},
        "judges": {role: {"temperature": TEMPERATURE if j.send_temperature else None,
                          j.token_param: JUDGE_MAX_TOKENS} for role, j in config.judge_roles()},
    }


def judge_request(task: WildTraceTask, response: str, settings: Mapping[str, Any],
                  token_param: str) -> ChatRequest:
    return ChatRequest(prompts.render_judge_prompt(task.question, task.rubric, response),
                       max_tokens=settings[token_param], temperature=settings["temperature"])


def read_verdict(reply: str, max_points: float) -> tuple[float, dict[str, Any]]:
    """Reading 8: the total, normalised by the rubric's points with the clamp recorded."""
    total = parse_total(reply)
    verdict = normalise(total, max_points)
    return verdict.score, {"total": total, "clamped": verdict.clamped}


# --- metrics: functions of (..., 1, tasks); NaN marks a task not answered ok -------------------------

def _all_tasks(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
    return stats.cell_mean(values, missing="zero")


def _scored(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
    return stats.cell_mean(values, missing="exclude")


def _coverage(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
    return stats.share_present(values)


def _scored_n(values: np.ndarray, strata: Mapping[str, np.ndarray]) -> np.ndarray:
    import numpy as np
    return (~np.isnan(values)).sum(axis=(-2, -1)).astype(float)


METRICS = (
    Metric("all_tasks", "All: mean over every task in the data file (not answered ok = 0)", _all_tasks,
           headline=True),
    Metric("scored", "Scored: mean over tasks answered ok with a full-panel score", _scored,
           headline=True, partial=True),
    Metric("coverage", "share of tasks scored", _coverage, partial=True),
    Metric("scored_n", "tasks scored", _scored_n, partial=True, interval=False),
)


class WildTrace(BaseBenchmark):
    """Spec §1-5, readings 1-11."""

    NAME: ClassVar[str] = "wildtrace"
    OPTIONS: ClassVar[Mapping[str, Any]] = dict(BOOTSTRAP_OPTIONS)
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ()
    # Runs of different models may be compared only when these fingerprint parts agree (§5:
    # never mix caps policies, prompts, retry policies, judge panels or aggregation policies).
    # Each model keeps its own cap: the caps *table* is what must agree.
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = ("prompts", "caps_table", "judge_panel", "aggregation",
                                                    "retry", "tasks")
    STATUSES: ClassVar[tuple[str, ...]] = ("ok", "out_of_context", "refused", "empty", "failed_permanent",
                                           "failed_transient", "pending")
    ITEM: ClassVar[type] = WildTraceTask
    ITEM_NOUN: ClassVar[str] = "task"
    FIGURE: ClassVar[str] = "judge_distributions"

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        if config.corpus is None:
            raise config.error("corpus", "required for wildtrace, the corpus directory")
        if not config.corpus.is_dir():
            raise config.error("corpus", f"{config.corpus} is not a directory")
        if not config.judges:
            raise config.error("judges", "wildtrace needs at least one judge (the paper uses three)")
        if config.model.provider == "none":
            raise config.error("model", "wildtrace needs a contestant model")
        self.check_bootstrap()
        self.caps = caps_for(config.model.name, config.model.caps)
        warning = unlisted_warning(config.model.name, self.caps)
        self.warnings = [warning] if warning else []
        self.corpus = Corpus(config.corpus)
        self.tasks: list[WildTraceTask] = read_tasks(config.data)
        for task in self.tasks:   # existence only: documents are read when their call is made
            self.corpus.path(task.corpus_file, Where(str(config.data), task=task.task_id))
        self.by_id = {t.task_id: t for t in self.tasks}

    def check_documents(self) -> None:
        """Every document decodes as UTF-8 (streamed), so no call fails on it mid-run."""
        checked: set[str] = set()
        for task in self.tasks:
            if task.corpus_file not in checked:
                self.corpus.check_utf8(task.corpus_file, Where(str(self.config.data), task=task.task_id))
                checked.add(task.corpus_file)

    def fingerprint_parts(self) -> dict[str, Any]:
        config = self.config
        return {
            "prompts": {name: sha256_text(text) for name, text in prompts.prompt_texts().items()},
            "caps": asdict(self.caps),
            "caps_table": sha256_text(json.dumps(caps_table(), sort_keys=True)),
            "decoding": decoding(config),
            "contestant": {"provider": config.model.provider, "name": config.model.name},
            "judge_panel": [{"role": role, "provider": j.provider, "name": j.name}
                            for role, j in config.judge_roles()],
            "aggregation": AGGREGATION_POLICY,
            "retry": asdict(config.retry),
            "tasks": sha256_text(json.dumps([asdict(t) for t in self.tasks], sort_keys=True)),
        }

    # --- generation -------------------------------------------------------------------------------

    def _prepare(self, task: WildTraceTask) -> Prepared:
        settings = decoding(self.config)["model"]
        document = self.corpus.read(task.corpus_file)
        route = route_for(document, self.caps)
        fields = {"task_id": task.task_id, "route": route.as_dict()}
        if not route.in_scope:   # reading 1: not sent, not truncated
            return Prepared(None, fields | {"status": Status.OUT_OF_CONTEXT.value, "text": None})
        request = ChatRequest(prompts.render_answer_prompt(task.question, document),
                              max_tokens=settings[self.config.model.token_param],
                              temperature=settings["temperature"])
        return Prepared(request, fields)

    def generation_calls(self) -> list[Call]:
        return [Call(task.task_id, "model", functools.partial(self._prepare, task)) for task in self.tasks]

    # --- judging (readings 7-9) -----------------------------------------------------------------------

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        settings = decoding(self.config)["judges"]
        calls = []
        for task in self.tasks:
            response = responses.get(task.task_id)
            if response is None or response["status"] != Status.OK:   # only ok answers are judged
                continue
            parse = interpreter(functools.partial(read_verdict, max_points=task.max_points))
            for role, judge in self.config.judge_roles():
                fields = {"task_id": task.task_id, "judge": role, "judge_model": judge.name}
                request = judge_request(task, response["text"], settings[role], judge.token_param)
                calls.append(Call(f"{task.task_id}::{role}", role, functools.partial(Prepared, request, fields),
                                  parse))
        return calls

    # --- aggregation (reading 10) ------------------------------------------------------------------

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        pending_generation = pending_judges = 0
        roles = self.config.judge_roles()
        for task in self.tasks:
            response = responses.get(task.task_id)
            status = response["status"] if response else Status.PENDING.value
            verdicts = [judgements.get(f"{task.task_id}::{role}") for role, _ in roles]
            value: float | None
            if status == Status.OK:
                value = panel_mean([v["score"] if v and v["status"] == "ok" else None for v in verdicts])
                pending_judges += sum(1 for v in verdicts if not v or v["status"] != "ok")
            elif status in ZERO_STATUSES:
                value = 0.0
            else:   # failed_transient, or never generated: resumable
                value, pending_generation = None, pending_generation + 1
            rows.append({
                "task_id": task.task_id, "status": status, "score": value,
                "route": response.get("route") if response else None,
                "max_points": task.max_points,
                "rubric": [{"points": i.points, "criterion": i.criterion} for i in task.rubric],
                "judges": [{"judge": role, "model": judge.name,
                            "status": v["status"] if v else "pending",
                            "reply": reply_of(v),
                            "total": v.get("total") if v else None,
                            "score": v.get("score") if v and v["status"] == "ok" else None,
                            "clamped": v.get("clamped") if v else None,
                            "error": v.get("error") if v else None}
                           for (role, judge), v in zip(roles, verdicts)] if status == Status.OK else [],
            })
        complete = pending_generation == 0 and pending_judges == 0
        body: dict[str, Any] = {"complete": complete, "n_tasks": len(self.tasks), "tasks": rows}
        self.with_metrics(body)
        metrics = body["metrics"]
        all_tasks = metrics["all_tasks"]["value"] if complete else None
        body |= {
            "scored_overall": metrics["scored"]["value"],
            "scored_n": int(metrics["scored_n"]["value"] or 0),
            "all_tasks_overall": all_tasks,
            "overall": all_tasks,
            "status_counts": dict(Counter(r["status"] for r in rows)),
            "resumable": {"generation": pending_generation, "judge_calls": pending_judges},
        }
        body["tasks"] = body.pop("tasks")   # the rows last, after the numbers
        return body

    # --- evidence ---------------------------------------------------------------------------------------

    def evidence(self, responses: Mapping[str, Record], judgements: Mapping[str, Record],
                 scores: Mapping[str, Any]) -> list[ItemEvidence]:
        out = []
        for row in scores["tasks"]:
            task = self.by_id[row["task_id"]]
            response = responses.get(task.task_id) or {}
            route = row.get("route") or {}
            sections: list[Any] = [
                Fact("status", row["status"]),
                Fact("route", f"cap {route.get('cap', '-')} characters ({route.get('cap_kind', '-')}), "
                              f"document {route.get('doc_chars', '-')} characters" if route else "not routed yet"),
                Passage("question", task.question),
                Passage("response", response.get("text")),
                *reasoning_passages(response),
                Table("rubric", ("item", "points", "criterion"),
                      tuple((f"P{i}", item.points, item.criterion) for i, item in enumerate(task.rubric, 1))),
            ]
            judges: dict[str, float | None] = {}
            for verdict in row["judges"]:
                label = f"{verdict['judge']} {verdict['model']}"
                judges[label] = verdict["score"]
                awarded = points_awarded(verdict["reply"])
                sections.append(Table(f"{label}: verdict", ("status", "total", "max points", "normalised score",
                                                            "clamped", "points per item"),
                                      ((verdict["status"], verdict["total"], task.max_points, verdict["score"],
                                        verdict["clamped"],
                                        ", ".join(f"P{i}={p:g}" for i, p in enumerate(awarded, 1))
                                        if awarded is not None else "not given"),)))
                sections.append(Passage(f"{label}: reply", verdict["reply"]))
                sections += reasoning_passages(judgements.get(f"{task.task_id}::{verdict['judge']}"), f"{label}: ")
            if row["judges"]:
                sections.append(Fact("panel mean", "-" if row["score"] is None else f"{row['score']:.4f}"))
            out.append(ItemEvidence(task.task_id, row["status"], row["score"], judges, tuple(sections)))
        return out

    # --- reading a scores.json ----------------------------------------------------------------------------

    @classmethod
    def metrics(cls) -> tuple[Metric, ...]:
        return METRICS

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        rows = scores["tasks"]
        return ItemResults(
            ids=tuple(r["task_id"] for r in rows),
            values=[[r["score"] if r["status"] == Status.OK and r["score"] is not None else NAN for r in rows]],
            scores={r["task_id"]: r["score"] for r in rows},
            statuses={r["task_id"]: r["status"] for r in rows},
            attempted={r["task_id"]: r["status"] != Status.OUT_OF_CONTEXT for r in rows},
            judges={r["task_id"]: {f"{j['judge']} {j['model']}": j["score"] for j in r["judges"]
                                   if j["score"] is not None} for r in rows})

    @classmethod
    def breakdown(cls, scores: Mapping[str, Any]) -> pd.DataFrame:
        """Per judge: verdicts, mean and s.d. of the normalised scores."""
        return judge_table(cls.results(scores))

    @classmethod
    def figure(cls, scores: Mapping[str, Any]) -> ReportFigure:
        """Per-judge score distributions."""
        from evalnb.figures import new_figure

        results = cls.results(scores)
        per_judge: dict[str, list[float]] = {}
        for item in results.ids:
            for judge, score in results.judges.get(item, {}).items():
                per_judge.setdefault(judge, []).append(score)
        fig = new_figure((6, 3.5))
        ax = fig.subplots()
        labels = sorted(per_judge)
        if labels:
            ax.boxplot([per_judge[j] for j in labels], showmeans=True)
            ax.set_xticks(range(1, len(labels) + 1), [j.replace(" ", "\n", 1) for j in labels])
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel("normalised judge score")
        ax.set_title(offline_title(scores, "per-judge score distributions"))
        return fig

    @classmethod
    def compare_tables(cls, runs: Sequence[RunScores], top: int) -> list[tuple[str, pd.DataFrame]]:
        table = rubric_items(runs)
        return [("rubric items awarded least often (share of their points, over judges)",
                 table.head(top) if len(table) else table)]

    @classmethod
    def compare_figure(cls, runs: Sequence[RunScores]) -> ReportFigure | None:
        return points_distribution(runs)


# --- analysis across runs ----------------------------------------------------------------------------

def _rubrics(runs: Sequence[RunScores]) -> dict[str, list[tuple[float, str]]]:
    """Each task's rubric: from the runs' rows, else (runs recorded before rows carried it) the data file."""
    rubrics: dict[str, list[tuple[float, str]]] = {}
    for _, scores in runs:
        for row in scores["tasks"]:
            if row.get("rubric"):
                rubrics.setdefault(row["task_id"], [(i["points"], i["criterion"]) for i in row["rubric"]])
    if not rubrics and runs:
        data = Path(runs[0][1]["config"]["data"])
        if data.exists():
            rubrics = {t.task_id: [(i.points, i.criterion) for i in t.rubric] for t in read_tasks(data)}
    return rubrics


def rubric_items(runs: Sequence[RunScores]) -> pd.DataFrame:
    """How often each rubric item was awarded (share of its points, over judges), per model;
    the items missed most come first. Only judges whose reply itemises the points count."""
    import pandas as pd

    rubrics = _rubrics(runs)
    shares: dict[tuple[str, int], dict[str, list[float]]] = {}
    for label, scores in runs:
        for row in scores["tasks"]:
            rubric = rubrics.get(row["task_id"])
            if rubric is None:
                continue   # the data changed since the run: nothing to attribute to
            for verdict in row["judges"]:
                awarded = points_awarded(verdict["reply"])
                if awarded is None or len(awarded) != len(rubric):
                    continue   # a reply that does not itemise cannot be attributed to items
                for i, ((points, _), got) in enumerate(zip(rubric, awarded)):
                    if points:
                        shares.setdefault((row["task_id"], i), {}).setdefault(label, []).append(
                            min(1.0, max(0.0, got / points)))
    rows = []
    for (task_id, i), per_model in shares.items():
        points, criterion = rubrics[task_id][i]
        rates = {m: sum(v) / len(v) for m, v in per_model.items()}
        rows.append({"task_id": task_id, "item": f"P{i + 1}", "points": points, "criterion": criterion[:90],
                     **rates, "award_rate": sum(rates.values()) / len(rates)})
    out = pd.DataFrame(rows)
    if len(out):
        out = out.sort_values(["award_rate", "task_id", "item"]).set_index(["task_id", "item"])
    return out


def points_distribution(runs: Sequence[RunScores]) -> ReportFigure:
    """Per model, each judged task's points as a share of its rubric's (panel mean of totals)."""
    from evalnb.figures import new_figure

    fig = new_figure((6, 3.5))
    ax = fig.subplots()
    for label, scores in runs:
        shares = [sum(j["total"] for j in row["judges"]) / len(row["judges"]) / row["max_points"]
                  for row in scores["tasks"]
                  if row["judges"] and row.get("max_points") and all(j["total"] is not None for j in row["judges"])]
        totals = shares or [sum(j["total"] for j in row["judges"]) / len(row["judges"]) / 100
                            for row in scores["tasks"] if row["judges"] and "max_points" not in row
                            and all(j["total"] is not None for j in row["judges"])]
        ax.hist(totals, bins=10, range=(0, 1), alpha=0.5, label=label)
    ax.set_xlabel("points per judged task, share of its rubric's points (panel mean of totals)")
    ax.set_ylabel("tasks")
    ax.legend(fontsize=7)
    ax.set_title("points distribution per task")
    return fig
