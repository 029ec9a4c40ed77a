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

from evalnb import prompts
from evalnb.caps import caps_for, caps_table, route_for, unlisted_warning
from evalnb.config import RunConfig
from evalnb.data import Corpus, Where, json_records, read_jsonl, require, unique_ids
from evalnb.judging import JudgeReplyError, normalise, panel_mean, parse_total
from evalnb.providers.base import ChatRequest, Completion
from evalnb.runner import Call, Prepared, Record

NAME = "wildtrace"
OPTIONS: Mapping[str, Any] = {}
PATH_OPTIONS: tuple[str, ...] = ()
# Runs of different models may be compared only when these fingerprint parts agree (§5:
# never mix caps policies, prompts, retry policies, judge panels or aggregation policies).
# Each model keeps its own cap: the caps *table* is what must agree.
COMPARABLE_PARTS = ("prompts", "caps_table", "judge_panel", "aggregation", "retry", "tasks")

# Spec §2 and §4.
TEMPERATURE = 0.1
MAX_TOKENS = 8192
MAX_TOKENS_REASONING = 32768
JUDGE_MAX_TOKENS = 16384

# Reading 5: final statuses that score 0; only "ok" is judged; failed_transient is resumable.
ZERO_STATUSES = ("out_of_context", "refused", "empty", "failed_permanent")
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


def check_config(config: RunConfig) -> list[str]:
    if config.corpus is None:
        raise config.error("corpus", "required for wildtrace, the corpus directory")
    if not config.corpus.is_dir():
        raise config.error("corpus", f"{config.corpus} is not a directory")
    if not config.judges:
        raise config.error("judges", "wildtrace needs at least one judge (the paper uses three)")
    if config.model.provider == "none":
        raise config.error("model", "wildtrace needs a contestant model")
    warning = unlisted_warning(config.model.name, caps_for(config.model.name, config.model.caps))
    return [warning] if warning else []


def load_tasks(config: RunConfig) -> list[WildTraceTask]:
    tasks = read_tasks(config.data)
    corpus = Corpus(config.corpus)  # type: ignore[arg-type]  # check_config ensured it
    for task in tasks:   # existence only: documents are read when their call is made
        corpus.path(task.corpus_file, Where(str(config.data), task=task.task_id))
    return tasks


def check_documents(config: RunConfig, tasks: Sequence[WildTraceTask]) -> None:
    """Every document decodes as UTF-8 (streamed), so no call fails on it mid-run."""
    corpus = Corpus(config.corpus)  # type: ignore[arg-type]
    checked: set[str] = set()
    for task in tasks:
        if task.corpus_file not in checked:
            corpus.check_utf8(task.corpus_file, Where(str(config.data), task=task.task_id))
            checked.add(task.corpus_file)


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


def fingerprint_parts(config: RunConfig, tasks: Sequence[WildTraceTask]) -> dict[str, Any]:
    caps = caps_for(config.model.name, config.model.caps)
    return {
        "prompts": {name: sha256_text(text) for name, text in prompts.prompt_texts().items()},
        "caps": asdict(caps),
        "caps_table": sha256_text(json.dumps(caps_table(), sort_keys=True)),
        "decoding": decoding(config),
        "contestant": {"provider": config.model.provider, "name": config.model.name},
        "judge_panel": [{"role": role, "provider": j.provider, "name": j.name}
                        for role, j in config.judge_roles()],
        "aggregation": AGGREGATION_POLICY,
        "retry": asdict(config.retry),
        "tasks": sha256_text(json.dumps([asdict(t) for t in tasks], sort_keys=True)),
    }


# --- generation -----------------------------------------------------------------------------

def generation_calls(config: RunConfig, tasks: Sequence[WildTraceTask]) -> list[Call]:
    caps = caps_for(config.model.name, config.model.caps)
    corpus = Corpus(config.corpus)  # type: ignore[arg-type]
    settings = decoding(config)["model"]

    def prepare(task: WildTraceTask) -> Prepared:
        document = corpus.read(task.corpus_file)
        route = route_for(document, caps)
        fields = {"task_id": task.task_id, "route": route.as_dict()}
        if not route.in_scope:   # reading 1: not sent, not truncated
            return Prepared(None, fields | {"status": "out_of_context", "text": None})
        request = ChatRequest(prompts.render_answer_prompt(task.question, document),
                              max_tokens=settings[config.model.token_param],
                              temperature=settings["temperature"])
        return Prepared(request, fields)

    return [Call(task.task_id, "model", functools.partial(prepare, task)) for task in tasks]


def generation_done(record: Record) -> bool:
    return record["status"] != "failed_transient"


# --- judging (readings 7-9) ----------------------------------------------------------------

def read_verdict(completion: Completion, max_points: float) -> dict[str, Any]:
    """A judge reply as a verdict, or a resumable judge failure (never a zero)."""
    if completion.status != "ok":
        return {"status": f"judge_{completion.status}", "text": completion.text,
                "error": {"kind": "judge", "message": f"judge reply was {completion.status}"}}
    try:
        total = parse_total(completion.text)
    except JudgeReplyError as e:
        return {"status": "failed_parse", "text": completion.text,
                "error": {"kind": "parse", "message": str(e)}}
    verdict = normalise(total, max_points)
    return {"status": "ok", "text": completion.text, "total": total,
            "score": verdict.score, "clamped": verdict.clamped}


def judge_request(task: WildTraceTask, response: str, settings: Mapping[str, Any],
                  token_param: str) -> ChatRequest:
    return ChatRequest(prompts.render_judge_prompt(task.question, task.rubric, response),
                       max_tokens=settings[token_param], temperature=settings["temperature"])


def judge_calls(config: RunConfig, tasks: Sequence[WildTraceTask],
                responses: Mapping[str, Record]) -> list[Call]:
    settings = decoding(config)["judges"]
    calls = []
    for task in tasks:
        response = responses.get(task.task_id)
        if response is None or response["status"] != "ok":   # only ok answers are judged
            continue
        for role, judge in config.judge_roles():
            fields = {"task_id": task.task_id, "judge": role, "judge_model": judge.name}
            request = judge_request(task, response["text"], settings[role], judge.token_param)
            calls.append(Call(f"{task.task_id}::{role}", role,
                              functools.partial(Prepared, request, fields),
                              functools.partial(read_verdict, max_points=task.max_points)))
    return calls


def judge_done(record: Record) -> bool:
    return record["status"] == "ok"


# --- aggregation (reading 10) --------------------------------------------------------------

def score(config: RunConfig, tasks: Sequence[WildTraceTask], responses: Mapping[str, Record],
          judgements: Mapping[str, Record]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    pending_generation = pending_judges = 0
    for task in tasks:
        response = responses.get(task.task_id)
        status = response["status"] if response else "pending"
        verdicts = {role: judgements.get(f"{task.task_id}::{role}") for role, _ in config.judge_roles()}
        value: float | None
        if status == "ok":
            value = panel_mean([v["score"] if v and v["status"] == "ok" else None
                                for v in verdicts.values()])
            pending_judges += sum(1 for v in verdicts.values() if not v or v["status"] != "ok")
        elif status in ZERO_STATUSES:
            value = 0.0
        else:   # failed_transient, or never generated: resumable
            value, pending_generation = None, pending_generation + 1
        rows.append({
            "task_id": task.task_id, "status": status, "score": value,
            "route": response.get("route") if response else None,
            "judges": [{"judge": role, "model": judge.name,
                        "status": v["status"] if v else "pending",
                        "reply": v.get("text") if v else None,
                        "total": v.get("total") if v else None,
                        "score": v.get("score") if v else None,
                        "clamped": v.get("clamped") if v else None,
                        "error": v.get("error") if v else None}
                       for (role, judge), v in zip(config.judge_roles(), verdicts.values())
                       ] if status == "ok" else [],
        })
    scored = [r["score"] for r in rows if r["status"] == "ok" and r["score"] is not None]
    complete = pending_generation == 0 and pending_judges == 0
    all_tasks = sum(r["score"] or 0.0 for r in rows) / len(tasks) if complete else None
    return {
        "complete": complete,
        "scored_overall": sum(scored) / len(scored) if scored else None,
        "scored_n": len(scored),
        "all_tasks_overall": all_tasks,
        "overall": all_tasks,
        "n_tasks": len(tasks),
        "status_counts": dict(Counter(r["status"] for r in rows)),
        "resumable": {"generation": pending_generation, "judge_calls": pending_judges},
        "tasks": rows,
    }


# --- comparison across runs ------------------------------------------------------------------

def items(scores: Mapping[str, Any]) -> dict[str, tuple[float | None, bool]]:
    """Task -> (score, attempted): out-of-context tasks were never sent, so not attempted."""
    return {r["task_id"]: (r["score"], r["status"] != "out_of_context") for r in scores["tasks"]}


def verdicts(scores: Mapping[str, Any]) -> list[tuple[str, str, float]]:
    """(task, judge, normalised score) for every judge verdict."""
    return [(r["task_id"], f"{j['judge']} {j['model']}", j["score"])
            for r in scores["tasks"] for j in r["judges"] if j["score"] is not None]
