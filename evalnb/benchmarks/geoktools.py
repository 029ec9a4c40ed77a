"""GeoKTools: structured answers, exact match first, then a geospatial LLM judge or the
deterministic offline scorer; accuracy overall and by K with seeded bootstrap intervals.

Reference: the GeoKTools protocol (§1, §3-4) and spec README readings 12-15.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from evalnb import prompts, stats
from evalnb.config import RunConfig
from evalnb.data import Where, json_records, read_jsonl, record_id, require
from evalnb.errors import ConfigError
from evalnb.judging import JudgeReplyError, as_number, field_of
from evalnb.providers.base import ChatRequest, Completion
from evalnb.runner import Call, Prepared, Record
from evalnb.structured_answers import (TOLERANCE, deterministic_score, exact_match, golden_list,
                                       golden_string_notes)

if TYPE_CHECKING:
    import pandas as pd

NAME = "geoktools"
OPTIONS: Mapping[str, Any] = {
    "predictions": None,          # JSONL {id, response}, or a list of them, one per agent run;
                                  # without it the model answers each query
    "scorer": "deterministic",    # or "llm": the report's geospatial judge (judges[0])
    "judge_prompt_file": None,    # the judge's system prompt; default: ours (shipped)
    "judge_max_tokens": 8192,
    "repeats": None,              # agent runs (spec §3); null: one per predictions file, else 1
    "n_boot": stats.N_BOOT,
    "seed": 0,
}
PATH_OPTIONS = ("predictions", "judge_prompt_file")
COMPARABLE_PARTS = ("scoring", "aggregation", "repeats", "retry", "tasks")
K_VALUES = (1, 2, 3, 4)
DETERMINISTIC_LABEL = ("OFFLINE APPROXIMATION: scored by the deterministic offline scorer, which agrees "
                       "with the report's LLM-judge protocol on exact matches and clear misses and "
                       "differs on near misses; not comparable with the report's figures.")
AGREEMENT = 0.01   # the judge's overall score must equal the mean of its element scores
DEFAULT_JUDGE_PROMPT = "geoktools_judge_system.txt"
AGGREGATION_POLICY = (
    "geoktools/1: exact match (strip-equal or JSON-equal) 1.0 without a call; empty or missing "
    "response 0; else judge score or deterministic score (10% tolerance, 1-error, ROUGE-L F1); "
    "overall = mean over all cases; by K; macro = mean of per-K means; repeats averaged per case")


@dataclass(frozen=True)
class GeoCase:
    task_id: str         # case id, or "id#rN" for repeat N when repeats > 1
    case_id: str
    repeat: int
    query: str
    golden: str
    k: int
    snapshot_date: str


# --- loading -----------------------------------------------------------------------------

def read_cases(path: Path) -> list[dict[str, Any]]:
    cases = []
    for where, raw, case_id in json_records(path, "cases"):
        k = require(raw, "K", int, where)
        if k not in K_VALUES:
            raise where.error(f"K must be one of {K_VALUES}, got {k}", "K")
        golden = require(raw, "golden_answer_raw", str, where)
        try:
            golden_list(golden)   # reading 22: refused now, not scored 0 case after case
        except ValueError as e:
            raise where.error(str(e), "golden_answer_raw") from None
        cases.append({"id": case_id, "query": require(raw, "query", str, where),
                      "golden": golden, "K": k,
                      "snapshot_date": require(raw, "snapshot_date", str, where)})
    return cases


@dataclass(frozen=True)
class Predictions:
    responses: dict[str, str]     # a null or absent response is kept as "" (scores 0, reading 22)
    unknown_ids: list[str]
    duplicate_ids: list[str]
    missing_ids: list[str]
    no_response_ids: list[str]
    sha256: str

    def report(self, path: Path) -> dict[str, Any]:
        return {"file": str(path), "sha256": self.sha256, "predicted": len(self.responses),
                "unknown_ids": self.unknown_ids, "duplicate_ids": self.duplicate_ids,
                "missing_ids": self.missing_ids, "no_response_ids": self.no_response_ids,
                "note": "duplicates: the first line is used; unknown ids are ignored; a "
                        "missing prediction, or a line whose response is null or absent, scores 0"}


def read_predictions(path: Path, case_ids: Sequence[str]) -> Predictions:
    responses: dict[str, str] = {}
    unknown, duplicates, no_response = [], [], []
    known = set(case_ids)
    for line, raw in read_jsonl(path):
        where = Where(str(path), line)
        if not isinstance(raw, dict):
            raise where.error("expected an object {id, response}")
        case_id = record_id(raw, "id", where)
        response = raw.get("response")
        if response is not None and not isinstance(response, str):
            raise Where(str(path), line, case_id).error(
                f"expected a string (may be empty), null or no field; got {type(response).__name__}",
                "response")
        if case_id not in known:
            unknown.append(case_id)
        elif case_id in responses:
            duplicates.append(case_id)
        else:
            responses[case_id] = response or ""
            if response is None:
                no_response.append(case_id)
    return Predictions(responses, unknown, duplicates, [c for c in case_ids if c not in responses],
                       no_response, hashlib.sha256(path.read_bytes()).hexdigest())


def predictions_files(config: RunConfig) -> list[Path]:
    """The predictions files, one per agent run (checked by check_config)."""
    value = config.options["predictions"]
    if not value:
        return []
    return [Path(p) for p in value] if isinstance(value, list) else [Path(value)]


def repeats_of(config: RunConfig) -> int:
    """Agent runs: ``repeats`` when given, else one per predictions file (or 1)."""
    given = config.options["repeats"]
    return int(given) if given is not None else max(1, len(predictions_files(config)))


def _check_sources(config: RunConfig) -> list[str]:
    """Where the answers come from, and how many agent runs that makes (spec §3)."""
    value, repeats = config.options["predictions"], config.options["repeats"]
    if value is None:
        if config.model.provider in ("offline", "none"):
            raise config.error("predictions", "required unless a model answers the queries "
                                              "(there is no offline GeoKTools agent)")
        return []
    if not (isinstance(value, str) and value) and not (
            isinstance(value, list) and value and all(isinstance(p, str) and p for p in value)):
        raise config.error("predictions", f"expected a file, or a list of files (one per agent run), got {value!r}")
    files = predictions_files(config)
    for i, file in enumerate(files):
        if not file.is_file():
            raise config.error("predictions" + (f"[{i}]" if isinstance(value, list) else ""),
                               f"{file}: file not found")
    if len(files) == 1 and repeats is not None and repeats > 1:
        # Scoring one set of answers N times measures nothing and reports s.d. 0.
        raise config.error("repeats", f"{repeats} repeats over a single predictions file would score "
                           f"the same answers {repeats} times (s.d. 0). Repeats are agent runs (spec §3): "
                           f"give predictions as a list of {repeats} files, one per agent run, or omit "
                           f"predictions and give a model, which then answers each query {repeats} times")
    if len(files) > 1 and repeats is not None and repeats != len(files):
        raise config.error("repeats", f"{repeats}, but predictions lists {len(files)} files (one per agent "
                           "run); leave repeats out, or make them agree")
    seen: dict[str, int] = {}
    warnings = []
    for i, file in enumerate(files):
        sha = hashlib.sha256(file.read_bytes()).hexdigest()
        if sha in seen:
            warnings.append(f"predictions[{i}] is identical to predictions[{seen[sha]}]: the same answers "
                            "in two runs (a deterministic agent, or the same file twice?)")
        seen.setdefault(sha, i)
    return warnings


def check_config(config: RunConfig) -> list[str]:
    o = config.options
    if o["scorer"] not in ("deterministic", "llm"):
        raise config.error("scorer", f"expected deterministic or llm, got {o['scorer']!r}")
    for key in ("n_boot", "judge_max_tokens", "repeats"):
        if key == "repeats" and o[key] is None:
            continue   # one per predictions file
        if not isinstance(o[key], int) or isinstance(o[key], bool) or o[key] < 1:
            raise config.error(key, f"expected a positive integer, got {o[key]!r}")
    if not isinstance(o["seed"], int) or isinstance(o["seed"], bool):
        raise config.error("seed", f"expected an integer, got {o['seed']!r}")
    if o["scorer"] == "llm" and len(config.judges) != 1:
        raise config.error("judges", "the llm scorer uses exactly one judge (the report: Gemini 3.8 Flash)")
    warnings = _check_sources(config)
    if o["scorer"] == "deterministic" and config.judges:
        warnings.append("scorer is deterministic: the configured judges are not called")
    if o["scorer"] == "llm":
        _judge_prompt(config)
    return warnings


def _path(value: Any) -> Path | None:
    return Path(value) if value else None


def _judge_prompt(config: RunConfig) -> prompts.PromptFile:
    try:
        return prompts.read_prompt_file(_path(config.options["judge_prompt_file"]), DEFAULT_JUDGE_PROMPT)
    except ConfigError as e:
        raise config.error("judge_prompt_file", str(e)) from None


def load_tasks(config: RunConfig) -> list[GeoCase]:
    cases = read_cases(config.data)
    for file in predictions_files(config):
        read_predictions(file, [c["id"] for c in cases])   # validated now, before anything is written
    n = repeats_of(config)
    return [GeoCase(c["id"] if n == 1 else f"{c['id']}#r{r}", c["id"], r, c["query"], c["golden"],
                    c["K"], c["snapshot_date"]) for r in range(1, n + 1) for c in cases]


# --- fingerprint ---------------------------------------------------------------------------

def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def judge_config(config: RunConfig) -> dict[str, Any]:
    o = config.options
    if o["scorer"] == "deterministic":
        return {"scorer": "deterministic", "tolerance_ratio": TOLERANCE,
                "strings": "ROUGE-L F1 (rouge-score)", "model": None}
    judge = config.judges[0]
    prompt = _judge_prompt(config)
    return {"scorer": "llm", "model": judge.name, "provider": judge.provider,
            "temperature": "model default (not sent)", "max_tokens": o["judge_max_tokens"],
            "system_prompt_file": prompt.record(),
            "user_prompt_sha256": _sha(prompts.GEOKTOOLS_JUDGE_PROMPT),
            "structured_output_schema": prompts.GEOKTOOLS_JUDGE_SCHEMA,
            "exact_match_first": True}


def fingerprint_parts(config: RunConfig, tasks: Sequence[GeoCase]) -> dict[str, Any]:
    shas = [hashlib.sha256(p.read_bytes()).hexdigest() for p in predictions_files(config)]
    return {
        "scoring": judge_config(config),
        # One file keeps the shape runs recorded before lists of files were accepted.
        "contestant": {"predictions_sha256": shas[0] if len(shas) == 1 else shas} if shas else
                      {"provider": config.model.provider, "name": config.model.name,
                       "decoding": generation_settings(config)},
        "aggregation": AGGREGATION_POLICY,
        "repeats": repeats_of(config),
        "retry": asdict(config.retry),
        "tasks": _sha(json.dumps([asdict(t) for t in tasks], sort_keys=True)),
    }


# --- generation ------------------------------------------------------------------------------

def generation_settings(config: RunConfig) -> dict[str, Any]:
    # The no-tools baseline agent answers at the model's default temperature.
    return {"temperature": None, "max_tokens": 32768 if config.model.reasoning else 8192}


def _from_predictions(task: GeoCase, predictions: Predictions) -> Prepared:
    fields = {"task_id": task.task_id, "case_id": task.case_id, "repeat": task.repeat,
              "source": "predictions"}
    if task.case_id not in predictions.responses:
        return Prepared(None, fields | {"status": "missing", "text": None})
    text = predictions.responses[task.case_id]
    return Prepared(None, fields | {"status": "ok" if text.strip() else "empty", "text": text})


def generation_calls(config: RunConfig, tasks: Sequence[GeoCase]) -> list[Call]:
    files = predictions_files(config)
    if files:
        case_ids = sorted({t.case_id for t in tasks})
        runs = [read_predictions(file, case_ids) for file in files]   # run n answers repeat n
        return [Call(t.task_id, "model", functools.partial(_from_predictions, t, runs[t.repeat - 1]))
                for t in tasks]
    settings = generation_settings(config)
    return [Call(t.task_id, "model", functools.partial(
        Prepared, ChatRequest(t.query, settings["max_tokens"], settings["temperature"]),
        {"task_id": t.task_id, "case_id": t.case_id, "repeat": t.repeat, "source": "model"}))
        for t in tasks]


def generation_done(record: Record) -> bool:
    return record["status"] != "failed_transient"


# --- scoring (readings 12, 13) ------------------------------------------------------------------

def read_verdict(completion: Completion) -> dict[str, Any]:
    """The judge's element scores and overall score, checked to agree; else a judge failure."""
    if completion.status != "ok":
        return {"status": f"judge_{completion.status}", "judge_reply": completion.text,
                "error": {"kind": "judge", "message": f"judge reply was {completion.status}"}}
    try:
        score_value, verdict = field_of(completion.text, "score")
        score = as_number(score_value)
        elements = verdict.get("element_scores")
        if score is None or not 0 <= score <= 1:
            raise JudgeReplyError(f"'score' is not a number in [0, 1]: {score_value!r}")
        if not isinstance(elements, list) or any(
                (e := as_number(x)) is None or not 0 <= e <= 1 for x in elements):
            raise JudgeReplyError("'element_scores' is not a list of numbers in [0, 1]")
        values = [as_number(x) or 0.0 for x in elements]
        if values and abs(sum(values) / len(values) - score) > AGREEMENT:
            raise JudgeReplyError(f"'score' {score} is not the mean of 'element_scores' {values}")
    except JudgeReplyError as e:
        return {"status": "failed_parse", "judge_reply": completion.text,
                "error": {"kind": "parse", "message": str(e)}}
    return {"status": "ok", "method": "judge", "score": score, "element_scores": values,
            "judge_reply": completion.text}


def _decided(task: GeoCase, response: Record, config: RunConfig) -> dict[str, Any] | None:
    """The record of a score reached without a model call, or None when the judge must be asked."""
    fields = {"task_id": task.task_id, "case_id": task.case_id, "repeat": task.repeat, "K": task.k,
              "status": "ok"}
    if response["status"] != "ok":   # missing, empty, refused, failed_permanent
        return fields | {"method": response["status"], "score": 0.0}
    if exact_match(response["text"], task.golden):
        return fields | {"method": "exact", "score": 1.0}
    if config.options["scorer"] == "deterministic":
        score, elements = deterministic_score(response["text"], task.golden)
        return fields | {"method": "deterministic", "score": score, "element_scores": elements}
    return None


def judge_calls(config: RunConfig, tasks: Sequence[GeoCase], responses: Mapping[str, Record]) -> list[Call]:
    calls = []
    system = None
    for task in tasks:
        response = responses.get(task.task_id)
        if response is None or response["status"] == "failed_transient":
            continue   # still resumable at generation
        decided = _decided(task, response, config)
        if decided is not None:
            calls.append(Call(task.task_id, "judge1", functools.partial(Prepared, None, decided)))
            continue
        if system is None:
            system = _judge_prompt(config).text
        request = ChatRequest(prompts.render_geoktools_judge_prompt(task.query, task.golden, response["text"]),
                              max_tokens=config.options["judge_max_tokens"], temperature=None,
                              system=system, json_schema=prompts.GEOKTOOLS_JUDGE_SCHEMA)
        fields = {"task_id": task.task_id, "case_id": task.case_id, "repeat": task.repeat, "K": task.k}
        calls.append(Call(task.task_id, "judge1", functools.partial(Prepared, request, fields), read_verdict))
    return calls


def judge_done(record: Record) -> bool:
    return record["status"] == "ok"


# --- aggregation (readings 14, 15) ---------------------------------------------------------------

def headline(case_scores: Mapping[str, float], k_of: Mapping[str, int]) -> dict[str, Any]:
    by_k = {str(k): {"mean": stats.mean([s for c, s in case_scores.items() if k_of[c] == k]),
                     "n": sum(1 for c in case_scores if k_of[c] == k)} for k in K_VALUES}
    per_k = [v["mean"] for v in by_k.values() if v["mean"] is not None]
    return {"overall": stats.mean(list(case_scores.values())), "n": len(case_scores),
            "by_k": by_k, "macro_over_k": stats.mean(per_k)}


def intervals(case_scores: Mapping[str, float], k_of: Mapping[str, int], n_boot: int, seed: int) -> dict[str, Any]:
    """Reading 15: overall, and per K resampling within that K only."""
    return {"overall": stats.bootstrap_ci(list(case_scores.values()), n_boot=n_boot, seed=seed).as_dict(),
            "by_k": {str(k): stats.bootstrap_ci([s for c, s in case_scores.items() if k_of[c] == k],
                                                n_boot=n_boot, seed=seed).as_dict() for k in K_VALUES}}


def score(config: RunConfig, tasks: Sequence[GeoCase], responses: Mapping[str, Record],
          judgements: Mapping[str, Record]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    pending = 0
    for task in tasks:
        response, verdict = responses.get(task.task_id), judgements.get(task.task_id)
        final = verdict if verdict is not None and verdict["status"] == "ok" else None
        pending += final is None
        rows.append({"task_id": task.task_id, "case_id": task.case_id, "repeat": task.repeat, "K": task.k,
                     "status": response["status"] if response else "pending",
                     "method": final.get("method") if final else None,
                     "score": final["score"] if final else None,
                     "element_scores": verdict.get("element_scores") if verdict else None,
                     "judge_status": verdict["status"] if verdict else "pending",
                     "judge_reply": verdict.get("judge_reply") if verdict else None,
                     "error": verdict.get("error") if verdict else None})
    complete = pending == 0
    k_of = {t.case_id: t.k for t in tasks}
    body: dict[str, Any] = {"complete": complete, "n_cases": len(k_of), "repeats": repeats_of(config)}
    if complete:
        per_repeat: list[dict[str, float]] = [{r["case_id"]: r["score"] for r in rows if r["repeat"] == n}
                                              for n in range(1, repeats_of(config) + 1)]
        case_scores = {c: sum(rep[c] for rep in per_repeat) / len(per_repeat) for c in k_of}
        body |= headline(case_scores, k_of)
        body["ci"] = intervals(case_scores, k_of, config.options["n_boot"], config.options["seed"])
        if repeats_of(config) > 1:
            heads = [headline(rep, k_of) for rep in per_repeat]
            body["repeat_summary"] = {
                "per_repeat": heads,
                "overall": stats.mean_sd([h["overall"] for h in heads]),
                "macro_over_k": stats.mean_sd([h["macro_over_k"] for h in heads]),
                "by_k": {str(k): stats.mean_sd([h["by_k"][str(k)]["mean"] for h in heads]) for k in K_VALUES}}
    else:
        body |= {"overall": None, "n": len(k_of), "by_k": None, "macro_over_k": None, "ci": None}
    body["methods"] = dict(Counter(r["method"] for r in rows if r["method"]))
    body["status_counts"] = dict(Counter(r["status"] for r in rows))
    body["resumable"] = {"judge_calls": pending}
    body["judge_config"] = judge_config(config) | {
        "routes_returned": sorted({v["model_route"] for v in judgements.values() if v.get("model_route")})}
    if config.options["scorer"] == "deterministic":
        body["offline"] = True
        body["label"] = DETERMINISTIC_LABEL
    files = predictions_files(config)
    if files:
        reports = [read_predictions(path, sorted(k_of)).report(path) | {"repeat": n}
                   for n, path in enumerate(files, start=1)]
        body["predictions_report"] = reports[0] if len(reports) == 1 else reports
    # Repeats share their case's golden answer: each case once.
    body |= golden_string_notes({t.case_id: (t.k, t.golden) for t in tasks})
    body["tasks"] = rows
    return body


# --- what the string scorer cannot see (reading 23) -------------------------------------------

class _HasPath(Protocol):
    def path(self, name: str) -> Path: ...


def rouge_blind_table(source: Mapping[str, Any] | _HasPath) -> pd.DataFrame:
    """Reading 23 for the report: one row per golden string element ROUGE-L cannot see.

    ``source`` is a scores.json body or a run; other benchmarks give an empty table.
    """
    import pandas as pd   # here, not at import: loading a benchmark stays light

    if isinstance(source, Mapping):
        scores: Mapping[str, Any] = source
    else:
        scores = json.loads(source.path("scores.json").read_text("utf-8"))
    entries = (scores.get("rouge_blind_golden_strings") or {}).get("elements", [])
    return pd.DataFrame(entries, columns=["case_id", "K", "index", "text"]).rename(
        columns={"index": "element", "text": "golden string (no [a-z0-9] token)"})


# --- comparison across runs ------------------------------------------------------------------

def items(scores: Mapping[str, Any]) -> dict[str, tuple[float | None, bool]]:
    """Case -> (score averaged over repeats, attempted: a prediction existed)."""
    by_case: dict[str, list[Any]] = {}
    for row in scores["tasks"]:
        by_case.setdefault(row["case_id"], []).append(row)
    return {case: (stats.mean([r["score"] for r in rows]) if all(r["score"] is not None for r in rows) else None,
                   any(r["status"] != "missing" for r in rows)) for case, rows in by_case.items()}


def verdicts(scores: Mapping[str, Any]) -> list[tuple[str, str, float]]:
    return []   # one judge: no panel to agree or disagree
