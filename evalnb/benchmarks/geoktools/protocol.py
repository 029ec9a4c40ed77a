"""GeoKTools: structured answers, exact match first, then a geospatial LLM judge or the
deterministic offline scorer; accuracy overall, by K and macro over K, with seeded
bootstrap intervals resampling within K (and repeats within cases).

Reference: the GeoKTools protocol (§1, §3-4). The protocol reads top to bottom: the cases
(:mod:`.cases`), the answers (:mod:`.predictions`, or the model), exact match or the scorer
(:mod:`.scoring`, the judge of :mod:`.judge`), the declared metrics and scores.json
(:mod:`.summary`). What a reader sees of a run is in :mod:`.analysis`.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from evalnb.stats import metrics
from evalnb.records import prompts
from evalnb.benchmarks.base import BOOTSTRAP_OPTIONS, NAN, BaseBenchmark, score_or_nan
from evalnb.benchmarks.geoktools.cases import K_VALUES, GeoCase, read_cases
from evalnb.benchmarks.geoktools.judge import (DEFAULT_JUDGE_PROMPT, JUDGE_PROMPT, JUDGE_SCHEMA, PROMPT_DIR,
                                               read_verdict, render_judge_prompt)
from evalnb.benchmarks.geoktools.predictions import Predictions, identical_warnings, prediction_files, read_predictions
from evalnb.benchmarks.geoktools.scoring import TOLERANCE, deterministic_score, exact_match, golden_string_notes
from evalnb.benchmarks.geoktools.summary import headline_keys, repeat_summary
from evalnb.core.run_config import RunConfig
from evalnb.core.errors import ConfigError
from evalnb.core.replies import interpreter, reply_of
from evalnb.core.types import Call, ChatRequest, ItemResults, Metric, Prepared, Record, Status

# --- the settings ------------------------------------------------------------------------------
# The cases (K_VALUES, GeoCase, read_cases) are in cases.py; the judge's prompt, schema and
# reply reading in judge.py; where the answers come from in predictions.py.

DETERMINISTIC_LABEL = ("OFFLINE APPROXIMATION: scored by the deterministic offline scorer, which agrees "
                       "with the report's LLM-judge protocol on exact matches and clear misses and "
                       "differs on near misses; not comparable with the report's figures.")
AGGREGATION_POLICY = (
    "geoktools/1: exact match (strip-equal or JSON-equal) 1.0 without a call; empty or missing "
    "response 0; else judge score or deterministic score (10% tolerance, 1-error, ROUGE-L F1); "
    "overall = mean over all cases; by K; macro = mean of per-K means; repeats averaged per case")


def generation_settings(config: RunConfig) -> dict[str, Any]:
    # The no-tools baseline agent answers at the model's default temperature.
    return {"temperature": None, "max_tokens": 32768 if config.model.reasoning else 8192}


# --- metrics: functions of (..., repeats, cases), strata "K=1".."K=4" -----------------------------

METRICS = (
    Metric("overall", "overall: mean over all cases (and repeats)", metrics.mean(), headline=True),
    Metric("macro_over_k", "macro over K: mean of the per-K means", metrics.macro_mean(), headline=True),
    *(Metric(f"K={k}", f"K={k}: mean over the cases with K = {k}", metrics.stratum_mean(f"K={k}")) for k in K_VALUES),
)


class GeoKToolsProtocol(BaseBenchmark):
    """The GeoKTools protocol, §1 and §3-4: the calls and the scores (the views are in :mod:`.analysis`)."""

    NAME: ClassVar[str] = "geoktools"
    METRICS: ClassVar[tuple[Metric, ...]] = METRICS
    OPTIONS: ClassVar[Mapping[str, Any]] = {
        "predictions": None,          # JSONL {id, response}, or a list of them, one per agent run;
                                      # without it the model answers each query
        "scorer": "deterministic",    # or "llm": the report's geospatial judge (judges[0])
        "judge_prompt_file": None,    # the judge's system prompt; default: ours (shipped)
        "judge_max_tokens": 8192,
        "repeats": None,              # agent runs (protocol §3); null: one per predictions file, else 1
        **BOOTSTRAP_OPTIONS,
    }
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ("predictions", "judge_prompt_file")
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = ("scoring", "aggregation", "repeats", "retry", "tasks")
    MOVED_TO_SHARED: ClassVar[tuple[str, ...]] = ("scoring.model", "scoring.provider", "scoring.user_prompt_sha256",
                                                  "scoring.system_prompt_file.sha256")
    STATUSES: ClassVar[tuple[str, ...]] = ("ok", "empty", "missing", "refused", "failed_permanent",
                                           "failed_transient", "pending")
    ITEM: ClassVar[type] = GeoCase
    ITEM_NOUN: ClassVar[str] = "case"
    CLUSTER_NOUN: ClassVar[str | None] = "case"   # the case, within its K stratum; agent runs are repeats within it

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        o = config.options
        if o["scorer"] not in ("deterministic", "llm"):
            raise config.error("scorer", f"expected deterministic or llm, got {o['scorer']!r}")
        self.positive_int("n_boot")
        self.positive_int("judge_max_tokens")
        if o["repeats"] is not None:   # else one per predictions file
            self.positive_int("repeats")
        self.check_bootstrap()
        if o["scorer"] == "llm" and len(config.judges) != 1:
            raise config.error("judges", "the llm scorer uses exactly one judge (the report: Gemini 3.8 Flash)")
        self.files = prediction_files(config)
        if o["scorer"] == "deterministic" and config.judges:
            self.warnings.append("scorer is deterministic: the configured judges are not called")
        self.judge_prompt = self._judge_prompt() if o["scorer"] == "llm" else None
        self.cases = read_cases(config.data)
        case_ids = [c["id"] for c in self.cases]
        # Each predictions file read once: validated now, before anything is written.
        self.predictions = [read_predictions(file, case_ids) for file in self.files]
        self.warnings += identical_warnings(self.predictions)
        self.repeats = int(o["repeats"]) if o["repeats"] is not None else max(1, len(self.files))
        n = self.repeats
        self.tasks: list[GeoCase] = [
            GeoCase(c["id"] if n == 1 else f"{c['id']}#r{r}", c["id"], r, c["query"], c["golden"], c["K"],
                    c["snapshot_date"]) for r in range(1, n + 1) for c in self.cases]

    # --- configuration ---------------------------------------------------------------------------------

    def _judge_prompt(self) -> prompts.PromptFile:
        value = self.config.options["judge_prompt_file"]
        try:
            return prompts.read_prompt_file(Path(value) if value else None, PROMPT_DIR / DEFAULT_JUDGE_PROMPT)
        except ConfigError as e:
            raise self.config.error("judge_prompt_file", str(e)) from None

    def judge_config(self) -> dict[str, Any]:
        o = self.config.options
        if self.judge_prompt is None:
            return {"scorer": "deterministic", "tolerance_ratio": TOLERANCE,
                    "strings": "ROUGE-L F1 (rouge-score)", "model": None}
        judge = self.config.judges[0]
        return {"scorer": "llm", "model": judge.name, "provider": judge.provider,
                "temperature": "model default (not sent)", "max_tokens": o["judge_max_tokens"],
                "system_prompt_file": self.judge_prompt.record(),
                "user_prompt_sha256": hashlib.sha256(JUDGE_PROMPT.encode()).hexdigest(),
                "structured_output_schema": JUDGE_SCHEMA,
                "exact_match_first": True}

    def prompts(self) -> Mapping[str, str]:   # the deterministic scorer sends none
        return {} if self.judge_prompt is None else {"judge_system": self.judge_prompt.text, "judge_user": JUDGE_PROMPT}

    def fingerprint_parts(self) -> dict[str, Any]:
        shas = [p.sha256 for p in self.predictions]
        config = self.config
        # retry, tasks, the judge and the prompts' texts: the shared part's (MOVED_TO_SHARED is left out)
        return {
            "scoring": self.judge_config(),
            # One file keeps the shape runs recorded before lists of files were accepted.
            "contestant": {"predictions_sha256": shas[0] if len(shas) == 1 else shas} if shas else
                          {"provider": config.model.provider, "name": config.model.name,
                           "decoding": generation_settings(config)},
            "aggregation": AGGREGATION_POLICY,
            "repeats": self.repeats,
        }

    # --- generation --------------------------------------------------------------------------------------

    @staticmethod
    def _from_predictions(task: GeoCase, predictions: Predictions) -> Prepared:
        fields = {"task_id": task.task_id, "case_id": task.case_id, "repeat": task.repeat, "source": "predictions"}
        if task.case_id not in predictions.responses:
            return Prepared(None, fields | {"status": Status.MISSING.value, "text": None})
        text = predictions.responses[task.case_id]
        return Prepared(None, fields | {"status": Status.OK.value if text.strip() else Status.EMPTY.value,
                                        "text": text})

    def generation_calls(self) -> list[Call]:
        if self.predictions:   # run n answers repeat n
            return [Call(t.task_id, "model", functools.partial(self._from_predictions, t,
                                                               self.predictions[t.repeat - 1]))
                    for t in self.tasks]
        settings = generation_settings(self.config)
        return [Call(t.task_id, "model", functools.partial(
            Prepared, ChatRequest(t.query, settings["max_tokens"], settings["temperature"]),
            {"task_id": t.task_id, "case_id": t.case_id, "repeat": t.repeat, "source": "model"}), sample=t.repeat)
            for t in self.tasks]

    # --- scoring: exact match first, then the judge or the deterministic scorer ---------------------------------------------------------------

    def _decided(self, task: GeoCase, response: Record) -> dict[str, Any] | None:
        """The record of a score reached without a model call, or None when the judge must be asked."""
        fields = {"task_id": task.task_id, "case_id": task.case_id, "repeat": task.repeat, "K": task.k,
                  "status": "ok"}
        if response["status"] != Status.OK:   # missing, empty, refused, failed_permanent
            return fields | {"method": response["status"], "score": 0.0}
        if exact_match(response["text"], task.golden):
            return fields | {"method": "exact", "score": 1.0}
        if self.judge_prompt is None:
            score, elements = deterministic_score(response["text"], task.golden)
            return fields | {"method": "deterministic", "score": score, "element_scores": elements}
        return None

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        calls = []
        for task in self.tasks:
            response = responses.get(task.task_id)
            if response is None or response["status"] == Status.FAILED_TRANSIENT:
                continue   # still resumable at generation
            decided = self._decided(task, response)
            if decided is not None:
                calls.append(Call(task.task_id, "judge1", functools.partial(Prepared, None, decided)))
                continue
            assert self.judge_prompt is not None
            request = ChatRequest(render_judge_prompt(task.query, task.golden, response["text"]),
                                  max_tokens=self.config.options["judge_max_tokens"], temperature=None,
                                  system=self.judge_prompt.text, json_schema=JUDGE_SCHEMA)
            fields = {"task_id": task.task_id, "case_id": task.case_id, "repeat": task.repeat, "K": task.k}
            calls.append(Call(task.task_id, "judge1", functools.partial(Prepared, request, fields),
                              interpreter(read_verdict), sample=task.repeat))
        return calls

    # --- aggregation: overall, by K, macro over K --------------------------------------------------------------------

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        rows: list[dict[str, Any]] = []
        pending = 0
        for task in self.tasks:
            response, verdict = responses.get(task.task_id), judgements.get(task.task_id)
            final = verdict if verdict is not None and verdict["status"] == "ok" else None
            pending += final is None
            rows.append({"task_id": task.task_id, "case_id": task.case_id, "repeat": task.repeat, "K": task.k,
                         "status": response["status"] if response else "pending",
                         "method": final.get("method") if final else None,
                         "score": final["score"] if final else None,
                         "element_scores": verdict.get("element_scores") if verdict else None,
                         "judge_status": verdict["status"] if verdict else "pending",
                         "reply": reply_of(verdict),
                         "error": verdict.get("error") if verdict else None})
        complete = pending == 0
        counts = Counter(c["K"] for c in self.cases)
        body: dict[str, Any] = {"complete": complete, "n_cases": len(self.cases), "repeats": self.repeats,
                                "tasks": rows}
        self.with_metrics(body)
        body |= headline_keys(body, counts)
        if complete and self.repeats > 1:
            body["repeat_summary"] = repeat_summary(self.results(body), METRICS)
        body["methods"] = dict(Counter(r["method"] for r in rows if r["method"]))
        body["status_counts"] = dict(Counter(r["status"] for r in rows))
        body["resumable"] = {"judge_calls": pending}
        body["judge_config"] = self.judge_config() | {
            "routes_returned": sorted({v["model_route"] for v in judgements.values() if v.get("model_route")})}
        if self.judge_prompt is None:
            body["offline"] = True
            body["label"] = DETERMINISTIC_LABEL
        if self.files:
            reports = [p.report(path) | {"repeat": n}
                       for n, (path, p) in enumerate(zip(self.files, self.predictions), start=1)]
            body["predictions_report"] = reports[0] if len(reports) == 1 else reports
        # Repeats share their case's golden answer: each case once.
        body |= golden_string_notes({c["id"]: (c["K"], c["golden"]) for c in self.cases})
        body["tasks"] = body.pop("tasks")   # the rows last, after the numbers
        return body

    # --- reading a scores.json ----------------------------------------------------------------------------

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        by_case: dict[str, list[Mapping[str, Any]]] = {}
        for row in scores["tasks"]:
            by_case.setdefault(row["case_id"], []).append(row)
        ids = tuple(by_case)
        repeats = max((r["repeat"] for r in scores["tasks"]), default=1)
        values = [[NAN] * len(ids) for _ in range(repeats)]
        for j, case in enumerate(ids):
            for row in by_case[case]:
                values[row["repeat"] - 1][j] = score_or_nan(row["score"])
        item_scores = {case: (sum(r["score"] for r in rows) / len(rows)
                              if all(r["score"] is not None for r in rows) else None)
                       for case, rows in by_case.items()}
        return ItemResults(
            ids=ids, values=values, scores=item_scores,
            statuses={case: "+".join(sorted({r["status"] for r in rows})) for case, rows in by_case.items()},
            attempted={case: any(r["status"] != Status.MISSING for r in rows) for case, rows in by_case.items()},
            strata={case: f"K={rows[0]['K']}" for case, rows in by_case.items()},
            judges={case: {f"repeat {r['repeat']}": r["score"] for r in rows if r["score"] is not None}
                    for case, rows in by_case.items()} if repeats > 1 else {})

