"""WildTrace: evidence-withheld long-document QA, judged by a three-judge panel.

The protocol, top to bottom: the settings (the protocol's §2 and §4), the tasks (:mod:`.tasks`), the
contestant's call with the prompt of :mod:`.prompt_text` (a document over the model's cap is
out of context: scored 0 and sent to nobody), the judges' calls and their replies read by
:mod:`.verdicts`, the task score and the declared metrics. What a reader sees (evidence,
figures, tables across runs) is in :mod:`evalnb.benchmarks.wildtrace.analysis`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

from evalnb.benchmarks.base import BOOTSTRAP_OPTIONS, NAN, BaseBenchmark
from evalnb.benchmarks.wildtrace.caps import caps_for, caps_table, route_for, unlisted_warning
import evalnb.benchmarks.wildtrace.repeats as repeats
from evalnb.benchmarks.wildtrace.imported import ImportedResponses, read_responses, source_model_warning
from evalnb.benchmarks.wildtrace.tasks import WildTraceTask, read_tasks
from evalnb.benchmarks.wildtrace.verdicts import read_verdict
from evalnb.stats import metrics
from evalnb.core.data import Corpus, Where
from evalnb.core.replies import interpreter, reply_of
from evalnb.core.run_config import RunConfig
from evalnb.core.types import Call, ChatRequest, ItemResults, Metric, Prepared, Record, Status

# Importable from the protocol as before: the prompts' texts and filling, and the reply's reading.
from evalnb.benchmarks.wildtrace.prompt_text import (ANSWER_PROMPT as ANSWER_PROMPT, JUDGE_PROMPT as JUDGE_PROMPT,
                                                     prompt_texts, render_answer_prompt,
                                                     render_judge_prompt)
from evalnb.benchmarks.wildtrace.verdicts import (normalise as normalise, parse_total as parse_total,
                                                  points_awarded as points_awarded)

# The protocol's §2 and §4.
TEMPERATURE = 0.1
MAX_TOKENS = 8192
MAX_TOKENS_REASONING = 32768
JUDGE_MAX_TOKENS = 16384


# The final statuses that score 0; only "ok" is judged; failed_transient is resumable. An
# imported file's unanswered task is missing, final, and scores 0.
ZERO_STATUSES = (Status.OUT_OF_CONTEXT, Status.REFUSED, Status.EMPTY, Status.FAILED_PERMANENT, Status.MISSING)
AGGREGATION_POLICY = (
    "wildtrace/1: judge score = total / sum(rubric points), clamped to [0,1]; task score = "
    "simple mean of all configured judges, only when all succeeded; Scored = mean over ok "
    "responses with a full-panel score; All = sum of task scores / tasks in the data file, "
    "missing/failed/out-of-context zero-filled; null while anything is resumable")


# --- the calls' settings -----------------------------------------------------------------------

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
    return ChatRequest(render_judge_prompt(task.question, task.rubric, response),
                       max_tokens=settings[token_param], temperature=settings["temperature"])


def panel_mean(scores: Sequence[float | None]) -> float | None:
    """A task's score exists only when every configured judge has one."""
    if not scores or any(s is None for s in scores):
        return None
    return sum(scores) / len(scores)  # type: ignore[arg-type]


# --- the score rule ---------------------------------------------------------------------------------

def task_score(status: str, judge_scores: Sequence[float | None]) -> float | None:
    """A task's score: the panel mean of its judges' normalised scores when it was answered ``ok``
    and every configured judge has scored it; 0 for a final non-ok answer (out of
    context, refused, empty, failed_permanent, missing); None while resumable
    (a transient failure, a missing judge verdict, or no answer yet)."""
    if status == Status.OK:
        return panel_mean(judge_scores)
    if status in ZERO_STATUSES:
        return 0.0
    return None


# --- the metrics, over a 1 x tasks matrix; NaN marks a task not answered ok ------------

METRICS = (
    Metric("all_tasks", "All: mean over every task in the data file (not answered ok = 0)",
           metrics.mean(missing="zero"),
           headline=True),
    Metric("scored", "Scored: mean over tasks answered ok with a full-panel score",
           metrics.item_mean(),   # with one answer per task: mean(missing="exclude"), the same computation
           headline=True, partial=True),
    Metric("coverage", "share of tasks scored", metrics.share_scored(), partial=True),
    Metric("scored_n", "tasks scored", metrics.count_items_scored(), partial=True, interval=False),
)


class WildTraceProtocol(BaseBenchmark):
    """The protocol's §1-5: the calls and the scores (the views are in :mod:`.analysis`)."""

    NAME: ClassVar[str] = "wildtrace"
    METRICS: ClassVar[tuple[Metric, ...]] = METRICS
    # responses: answers produced elsewhere (evalnb.benchmarks.wildtrace.imported), instead of calling the model
    # repeats: contestant answers per task (evalnb.benchmarks.wildtrace.repeats; absent from config.json at 1)
    OPTIONS: ClassVar[Mapping[str, Any]] = dict(BOOTSTRAP_OPTIONS) | {"responses": None, "repeats": repeats.DEFAULT}
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ("responses",)
    # Runs of different models may be compared only when these fingerprint parts agree (§5:
    # never mix caps policies, prompts, retry policies, judge panels or aggregation policies).
    # Each model keeps its own cap: the caps *table* is what must agree. prompts, judge_panel,
    # retry and tasks are read from the shared part (which compare checks whole anyway).
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = ("prompts", "caps_table", "judge_panel", "aggregation",
                                                    "retry", "tasks")
    STATUSES: ClassVar[tuple[str, ...]] = ("ok", "out_of_context", "refused", "empty", "failed_permanent",
                                           "missing", "failed_transient", "pending")
    ITEM: ClassVar[type] = WildTraceTask
    ITEM_NOUN: ClassVar[str] = "task"
    ITEM_NOUN_PLURAL: ClassVar[str] = "tasks"
    CLUSTER_NOUN: ClassVar[str | None] = "document"   # tasks about one document are one cluster
    # Contestant repeats: the bootstrap draws tasks with all their answers (item means), never
    # the answers again within a task; with one answer per task (the protocol) nothing changes.
    RESAMPLE_REPEATS: ClassVar[bool] = False

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        if config.corpus is None:
            raise config.error("corpus", "required for wildtrace, the corpus directory")
        if not config.corpus.is_dir():
            raise config.error("corpus", f"{config.corpus} is not a directory")
        if not config.judges:
            raise config.error("judges", "wildtrace needs at least one judge (the paper uses three)")
        if config.model.provider == "none" and not config.options["responses"]:
            raise config.error("model", "wildtrace needs a contestant model (or responses: a file of its answers)")
        self.check_bootstrap()
        self.caps = caps_for(config.model.name, config.model.caps)
        warning = unlisted_warning(config.model.name, self.caps)
        self.warnings = [warning] if warning else []
        self.corpus = Corpus(config.corpus)
        self.tasks: list[WildTraceTask] = read_tasks(config.data)
        for task in self.tasks:   # existence only: documents are read when their call is made
            self.corpus.path(task.corpus_file, Where(str(config.data), task=task.task_id))
        self.by_id = {t.task_id: t for t in self.tasks}
        self.imported: ImportedResponses | None = None
        if config.options["responses"]:   # read once, checked before anything is written
            self.imported = read_responses(Path(config.options["responses"]), list(self.by_id))
            warning = source_model_warning(self.imported, config.model.provider, config.model.name)
            self.warnings += [warning] if warning else []
        self.repeats = repeats.check_repeats(config, self.imported is not None, list(self.by_id))

    @property
    def calls_model(self) -> bool:
        return self.imported is None

    def summary_rows(self) -> list[tuple[str, str]]:
        rows = [("repeats", repeats.summary(self.repeats))] if self.repeats > 1 else []
        if self.imported is None:
            return rows
        return rows + [("responses", f"imported from {self.imported.path} (sha256 {self.imported.sha256}); "
                              "no model call")]

    def check_documents(self) -> None:
        """Every document decodes as UTF-8 (streamed), so no call fails on it mid-run."""
        checked: set[str] = set()
        for task in self.tasks:
            if task.corpus_file not in checked:
                self.corpus.check_utf8(task.corpus_file, Where(str(self.config.data), task=task.task_id))
                checked.add(task.corpus_file)

    def prompts(self) -> Mapping[str, str]:
        return prompt_texts()

    def fingerprint_parts(self) -> dict[str, Any]:
        # The prompts' texts, the judge panel, the retry policy and the task set are the shared
        # part's (evalnb.records.fingerprint.shared_parts): runs recorded before kept them here too.
        config = self.config
        return {
            "caps": asdict(self.caps),
            "caps_table": sha256_text(json.dumps(caps_table(), sort_keys=True)),
            "decoding": decoding(config),
            "contestant": {"provider": config.model.provider, "name": config.model.name,
                           **({"responses_sha256": self.imported.sha256} if self.imported else {})},
            "aggregation": AGGREGATION_POLICY,
            **({"repeats": self.repeats} if self.repeats > 1 else {}),   # absent at 1: today's fingerprint
        }

    # --- generation -------------------------------------------------------------------------------

    def _prepare(self, task: WildTraceTask, repeat: int = 1) -> Prepared:
        settings = decoding(self.config)["model"]
        document = self.corpus.read(task.corpus_file)
        route = route_for(document, self.caps)
        fields = {"task_id": task.task_id, **repeats.repeat_fields(repeat, self.repeats), "route": route.as_dict()}
        if self.imported is not None:   # recorded like a generated answer, no call
            return Prepared(None, fields | self.imported.record_fields(task.task_id, route.in_scope))
        if not route.in_scope:   # out of context: not sent, not truncated
            return Prepared(None, fields | {"status": Status.OUT_OF_CONTEXT.value, "text": None})
        request = ChatRequest(render_answer_prompt(task.question, document),
                              max_tokens=settings[self.config.model.token_param],
                              temperature=settings["temperature"])
        return Prepared(request, fields)

    def generation_calls(self) -> list[Call]:
        return [Call(repeats.repeat_key(task.task_id, n), "model", functools.partial(self._prepare, task, n), sample=n)
                for task in self.tasks for n in range(1, self.repeats + 1)]

    # --- judging -------------------------------------------------------------------------------------

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        settings = decoding(self.config)["judges"]
        calls = []
        for task, n in ((task, n) for task in self.tasks for n in range(1, self.repeats + 1)):
            key = repeats.repeat_key(task.task_id, n)
            response = responses.get(key)
            if response is None or response["status"] != Status.OK:   # only ok answers are judged
                continue
            parse = interpreter(functools.partial(read_verdict, max_points=task.max_points))
            for role, judge in self.config.judge_roles():
                fields = {"task_id": task.task_id, **repeats.repeat_fields(n, self.repeats), "judge": role,
                          "judge_model": judge.name}
                request = judge_request(task, response["text"], settings[role], judge.token_param)
                calls.append(Call(f"{key}::{role}", role, functools.partial(Prepared, request, fields), parse,
                                  sample=n))
        return calls

    # --- aggregation -----------------------------------------------------------------------------

    def _answer(self, task: WildTraceTask, n: int, responses: Mapping[str, Record],
                judgements: Mapping[str, Record]) -> dict[str, Any]:
        """One answer (repeat ``n``) of a task: its status, score and verdicts."""
        key = repeats.repeat_key(task.task_id, n)
        response = responses.get(key)
        status = response["status"] if response else Status.PENDING.value
        roles = self.config.judge_roles()
        verdicts = [judgements.get(f"{key}::{role}") for role, _ in roles]
        value = task_score(status, [v["score"] if v and v["status"] == "ok" else None for v in verdicts])
        return {
            "status": status, "score": value, "route": response.get("route") if response else None,
            "pending_judges": sum(1 for v in verdicts if not v or v["status"] != "ok") if status == Status.OK else 0,
            "pending_generation": int(status != Status.OK and value is None),   # failed_transient or not yet made
            "judges": [{"judge": role, "model": judge.name,
                        "status": v["status"] if v else "pending",
                        "reply": reply_of(v),
                        "total": v.get("total") if v else None,
                        "score": v.get("score") if v and v["status"] == "ok" else None,
                        "clamped": v.get("clamped") if v else None,
                        "error": v.get("error") if v else None}
                       for (role, judge), v in zip(roles, verdicts)] if status == Status.OK else [],
        }

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        pending_generation = pending_judges = 0
        for task in self.tasks:
            answers = [self._answer(task, n, responses, judgements) for n in range(1, self.repeats + 1)]
            pending_generation += sum(a["pending_generation"] for a in answers)
            pending_judges += sum(a["pending_judges"] for a in answers)
            first = answers[0]
            rows.append({
                "task_id": task.task_id, "status": first["status"], "score": first["score"],
                "corpus_file": task.corpus_file, "route": first["route"], "max_points": task.max_points,
                "rubric": [{"points": i.points, "criterion": i.criterion} for i in task.rubric],
                "judges": first["judges"],
                **(repeats.repeated_row(answers) if self.repeats > 1 else {}),
            })
        complete = pending_generation == 0 and pending_judges == 0
        body: dict[str, Any] = {"complete": complete, "n_tasks": len(self.tasks), "tasks": rows}
        self.with_metrics(body)
        declared = body["metrics"]
        all_tasks = declared["all_tasks"]["value"] if complete else None
        body |= {
            "scored_overall": declared["scored"]["value"],
            "scored_n": int(declared["scored_n"]["value"] or 0),
            "all_tasks_overall": all_tasks,
            "overall": all_tasks,
            "status_counts": dict(Counter(r["status"] for r in rows)),
            "resumable": {"generation": pending_generation, "judge_calls": pending_judges},
        }
        if self.repeats > 1:
            body["repeats"] = repeats.repeats_block(rows, self.repeats, self.results(body).values, body)
        if self.imported is not None:
            body["responses_report"] = self.imported.report(rows)
        body["tasks"] = body.pop("tasks")   # the rows last, after the numbers
        return body

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        rows = scores["tasks"]
        k = (scores.get("repeats") or {}).get("k") or max([len(r.get("repeats") or ()) for r in rows] + [1])
        return ItemResults(
            ids=tuple(r["task_id"] for r in rows),
            values=repeats.repeat_values(rows, k, NAN) if k > 1 else
            [[r["score"] if r["status"] == Status.OK and r["score"] is not None else NAN for r in rows]],
            scores={r["task_id"]: r["score"] for r in rows},
            statuses={r["task_id"]: r["status"] for r in rows},
            attempted={r["task_id"]: r["status"] not in (Status.OUT_OF_CONTEXT, Status.MISSING) for r in rows},
            judges={r["task_id"]: repeats.judge_means(r) if k > 1 else
                    {f"{j['judge']} {j['model']}": j["score"] for j in r["judges"] if j["score"] is not None}
                    for r in rows},
            clusters={r["task_id"]: r["corpus_file"] for r in rows if r.get("corpus_file")})
