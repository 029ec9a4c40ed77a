"""GeoExpertQueries: agent trajectories rated 0/1/2 by an autorater, three independent runs.

Reference: the GeoExpertQueries protocol (§2, the pins table). Each trajectory is condensed
to text; the autorater prompt follows a ``Today is YYYY-MM-DD.`` header; each of
``num_runs`` calls must yield a rating of 0, 1 or 2, mapped through the likert file
(0 -> 0.0, 1 -> 0.5, 2 -> 1.0) and averaged. A rating
that does not parse is a judge failure: resumable, never a zero.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar

from evalnb.stats import metrics, intervals as stats
from evalnb.records import prompts
from evalnb.benchmarks.base import BOOTSTRAP_OPTIONS, NAN, BaseBenchmark, metric_ci, metric_value
from evalnb.benchmarks.geoexpertqueries.queries import ExpertQuery, read_queries
from evalnb.benchmarks.geoexpertqueries.rater_prompt import (PROMPT_DIR, PROMPT_FILES, REQUIRED_PLACEHOLDERS,
                                                             check_rating_date, missing_placeholders,
                                                             placeholder_warnings, rating_prompt)
from evalnb.benchmarks.geoexpertqueries.ratings import agreement, read_rating
from evalnb.benchmarks.geoexpertqueries.trajectories import DEFAULT_OUTPUT_CHARS, DEFAULT_TOTAL_CHARS, Traces, condense, read_traces
from evalnb.core.run_config import RunConfig
from evalnb.core.errors import ConfigError, DataError
from evalnb.core.replies import interpreter, reply_of
from evalnb.core.types import Call, ChatRequest, ItemResults, Metric, Prepared, Record, Status

# Importable from the protocol as before: the autorater's reply reading.
from evalnb.benchmarks.geoexpertqueries.ratings import parse_rating as parse_rating

# The queries are read in queries.py, the rater's prompt is checked and filled in rater_prompt.py,
# its replies are read in ratings.py, and the trajectories condensed in trajectories.py.

OPTIONS: Mapping[str, Any] = {
    "traces": None,                  # JSONL of trajectories (schemas/trace.schema.json)
    "prompt_variant": "tool_agnostic",   # the report's primary; or "workflow" (tool-aware)
    "prompt_file": None,             # the official prompt file; default: ours for the variant
    "available_tools": [],           # listed in the workflow prompt
    "rating_date": None,             # YYYY-MM-DD for the header; default: the run's start date
    "likert_file": None,             # rating -> score; default 0 -> 0.0, 1 -> 0.5, 2 -> 1.0
    "num_runs": 3,
    "judge_max_tokens": 8192,
    "max_output_chars": DEFAULT_OUTPUT_CHARS,
    "max_trajectory_chars": DEFAULT_TOTAL_CHARS,
    **BOOTSTRAP_OPTIONS,
}
AGGREGATION_POLICY = ("geoexpertqueries/1: case score = mean of the mapped ratings of all runs, only when "
                      "every run parsed; missing trace = 0; overall = mean over all queries")


METRICS = (Metric("overall", "overall: mean over all queries of the mapped ratings (missing trace = 0)",
                  metrics.mean(), headline=True),)


class GeoExpertQueriesProtocol(BaseBenchmark):
    """The GeoExpertQueries protocol, §2 and the pins table: the calls and the scores (the views are in :mod:`.analysis`)."""

    NAME: ClassVar[str] = "geoexpertqueries"
    METRICS: ClassVar[tuple[Metric, ...]] = METRICS
    OPTIONS: ClassVar[Mapping[str, Any]] = OPTIONS
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ("traces", "prompt_file", "likert_file")
    COMPARABLE_PARTS: ClassVar[tuple[str, ...]] = ("rating", "aggregation", "retry", "tasks")
    MOVED_TO_SHARED: ClassVar[tuple[str, ...]] = ("rating.model", "rating.provider", "rating.prompt_file.sha256")
    STATUSES: ClassVar[tuple[str, ...]] = ("ok", "missing", "pending")
    ITEM: ClassVar[type] = ExpertQuery
    ITEM_NOUN: ClassVar[str] = "query"
    ITEM_NOUN_PLURAL: ClassVar[str] = "queries"
    CLUSTER_NOUN: ClassVar[str | None] = "query"   # the query; the autorater runs are repeats within it

    def __init__(self, config: RunConfig, recorded: Mapping[str, Any] | None = None) -> None:
        super().__init__(config)
        o = config.options
        if not o["traces"] or not isinstance(o["traces"], str):
            raise config.error("traces", "required, the JSONL file of agent trajectories")
        if o["prompt_variant"] not in PROMPT_FILES:
            raise config.error("prompt_variant", f"expected one of {', '.join(PROMPT_FILES)}, got {o['prompt_variant']!r}")
        if len(config.judges) != 1:
            raise config.error("judges", "the autorater is exactly one judge (the report: Gemini 3.8 Flash)")
        for key in ("num_runs", "judge_max_tokens", "max_output_chars", "max_trajectory_chars"):
            self.positive_int(key)
        self.check_bootstrap()
        if not isinstance(o["available_tools"], list) or not all(isinstance(t, str) for t in o["available_tools"]):
            raise config.error("available_tools", "expected a list of tool names (or descriptions)")
        if o["rating_date"] is not None and not check_rating_date(o["rating_date"]):
            raise config.error("rating_date", f"expected a date YYYY-MM-DD (e.g. 2026-03-14), got {o['rating_date']!r}")
        self.prompt = self._read("prompt_file", PROMPT_FILES[o["prompt_variant"]])
        self.warnings = self._check_placeholders()
        self.scale, self.scale_sha = self._likert()
        if o["prompt_variant"] == "workflow" and not o["available_tools"]:
            self.warnings.append("workflow prompt with no available_tools: the prompt will list none")
        self.rating_date = self._rating_date(recorded)
        self.tasks: list[ExpertQuery] = read_queries(config.data)
        traces_path = Path(o["traces"])
        try:
            data = traces_path.read_bytes()   # once: validated, condensed and hashed from these bytes
        except FileNotFoundError:
            raise DataError(str(traces_path), "file not found") from None
        self.traces_sha256 = hashlib.sha256(data).hexdigest()
        self.traces: Traces = read_traces(traces_path, [q.task_id for q in self.tasks], data)

    # --- configuration ------------------------------------------------------------------------------

    def _read(self, key: str, default: str) -> prompts.PromptFile:
        value = self.config.options[key]
        try:
            return prompts.read_prompt_file(Path(value) if value else None, PROMPT_DIR / default)
        except ConfigError as e:
            raise self.config.error(key, str(e)) from None

    def _check_placeholders(self) -> list[str]:
        """Refuse a prompt file that would silently drop the trajectory or the query."""
        variant, file = self.config.options["prompt_variant"], self.prompt
        missing = missing_placeholders(variant, file.text)
        if missing:
            raise self.config.error(
                "prompt_file", f"{file.path} lacks {', '.join('{' + m + '}' for m in missing)}, "
                f"which the {variant} variant needs (it takes "
                f"{', '.join('{' + n + '}' for n in REQUIRED_PLACEHOLDERS[variant])}; "
                "{reference} is optional): without them the autorater would rate nothing")
        return placeholder_warnings(file)

    def _likert(self) -> tuple[dict[str, float], str]:
        """The rating map and its file's sha256."""
        file = self._read("likert_file", "likert_scales.json")
        try:
            scale = json.loads(file.text)
        except json.JSONDecodeError as e:
            raise self.config.error("likert_file", f"{file.path} is not JSON ({e.msg})") from None
        if not isinstance(scale, dict) or set(scale) != {"0", "1", "2"} or not all(
                stats.is_finite(v) for v in scale.values()):
            raise self.config.error("likert_file", f"{file.path}: expected {{\"0\": x, \"1\": y, \"2\": z}} with numbers")
        return {k: float(v) for k, v in scale.items()}, file.sha256

    def _rating_date(self, recorded: Mapping[str, Any] | None) -> str:
        """The parameter, else the date this run started (kept across resumes)."""
        if self.config.options["rating_date"]:
            return str(self.config.options["rating_date"])   # a YAML date arrives as its ISO string
        if recorded and "rating" in recorded:
            return str(recorded["rating"]["value"]["date"])
        return datetime.now(timezone.utc).date().isoformat()

    def judge_config(self) -> dict[str, Any]:
        o = self.config.options
        judge = self.config.judges[0]
        return {"model": judge.name, "provider": judge.provider, "temperature": "model default (not sent)",
                "max_tokens": o["judge_max_tokens"], "prompt_variant": o["prompt_variant"],
                "prompt_file": self.prompt.record(), "date_header": f"Today is {self.rating_date}.",
                "available_tools": o["available_tools"] if o["prompt_variant"] == "workflow" else None,
                "likert": self.scale, "likert_sha256": self.scale_sha, "num_runs": o["num_runs"],
                "condensation": {"max_output_chars": o["max_output_chars"],
                                 "max_trajectory_chars": o["max_trajectory_chars"]}}

    def prompts(self) -> Mapping[str, str]:
        return {"rating": self.prompt.text}

    def fingerprint_parts(self) -> dict[str, Any]:
        # The retry policy, the task set, the rater and the prompt's text are the shared part's
        # (evalnb.records.fingerprint.shared_parts: MOVED_TO_SHARED is left out of "rating").
        return {
            "rating": {**self.judge_config(), "date": self.rating_date},
            "traces_sha256": self.traces_sha256,
            "aggregation": AGGREGATION_POLICY,
        }

    # --- "generation": the trajectories, condensed -------------------------------------------------

    def _condensed(self, task: ExpertQuery) -> Prepared:
        fields = {"task_id": task.task_id, "source": "traces"}
        trace = self.traces.traces.get(task.task_id)
        if trace is None:
            return Prepared(None, fields | {"status": Status.MISSING.value, "text": None})
        text = condense(trace, output_chars=self.config.options["max_output_chars"],
                        total_chars=self.config.options["max_trajectory_chars"])
        return Prepared(None, fields | {"status": Status.OK.value, "text": text, "steps": len(trace["steps"]),
                                        "converted_from_messages": task.task_id in self.traces.converted_ids})

    def generation_calls(self) -> list[Call]:
        return [Call(t.task_id, "model", functools.partial(self._condensed, t)) for t in self.tasks]

    def generation_done(self, record: Record) -> bool:
        return True   # read from a file: nothing to resume

    # --- rating ----------------------------------------------------------------------------------------

    def record_prompts(self) -> dict[str, str]:
        """The rater's prompt as sent, date header included, placeholders unfilled."""
        return {"rater": self.rating_template()}

    def rating_template(self) -> str:
        """The date header and the prompt file: the same for every trace, placeholders unfilled."""
        return f"Today is {self.rating_date}.\n\n{self.prompt.text}"

    def tools_text(self) -> str:
        return "\n".join(f"- {t}" for t in self.config.options["available_tools"]) or "(none listed)"

    def judge_calls(self, responses: Mapping[str, Record]) -> list[Call]:
        template, tools = self.rating_template(), self.tools_text()
        parse = interpreter(functools.partial(read_rating, scale=self.scale), who="autorater")
        calls = []
        for task in self.tasks:
            response = responses.get(task.task_id)
            if response is None or response["status"] != Status.OK:
                continue
            request = ChatRequest(rating_prompt(template, task, response["text"], tools),
                                  max_tokens=self.config.options["judge_max_tokens"], temperature=None)
            for run in range(1, self.config.options["num_runs"] + 1):
                fields = {"task_id": task.task_id, "run": run}
                calls.append(Call(f"{task.task_id}::run{run}", "judge1", functools.partial(Prepared, request, fields),
                                  parse, sample=run))
        return calls

    # --- aggregation -------------------------------------------------------------------------------------

    def score(self, responses: Mapping[str, Record], judgements: Mapping[str, Record]) -> dict[str, Any]:
        runs = range(1, self.config.options["num_runs"] + 1)
        rows: list[dict[str, Any]] = []
        complete_ratings: list[list[int]] = []
        pending = 0
        for task in self.tasks:
            response = responses.get(task.task_id)
            status = response["status"] if response else Status.PENDING.value
            verdicts = [judgements.get(f"{task.task_id}::run{n}") for n in runs]
            ratings: list[int | None] = [v["rating"] if v and v["status"] == "ok" else None for v in verdicts]
            value: float | None
            if status == Status.OK:
                rated = [r for r in ratings if r is not None]
                value = sum(self.scale[str(r)] for r in rated) / len(rated) if len(rated) == len(ratings) else None
                pending += len(ratings) - len(rated)
                if value is not None:
                    complete_ratings.append(rated)
            else:
                value = 0.0 if status == Status.MISSING else None
                pending += status != Status.MISSING
            rows.append({"task_id": task.task_id, "status": status, "score": value, "ratings": ratings,
                         "runs": [{"run": n, "status": v["status"] if v else "pending", "rating": r,
                                   "score": self.scale[str(r)] if r is not None else None,
                                   "reply": reply_of(v), "error": v.get("error") if v else None}
                                  for n, v, r in zip(runs, verdicts, ratings)] if status == Status.OK else []})
        complete = pending == 0
        routes = sorted({v["model_route"] for v in judgements.values() if v.get("model_route")})
        body: dict[str, Any] = {"complete": complete, "n": len(self.tasks), "tasks": rows}
        self.with_metrics(body)
        body |= {
            "overall": metric_value(body, "overall") if complete else None,
            "ci": {"overall": metric_ci(body, "overall")} if complete else None,
            "rating_counts": {str(k): sum(r.count(k) for r in complete_ratings) for k in (0, 1, 2)},
            "agreement": agreement(complete_ratings),
            "status_counts": dict(Counter(r["status"] for r in rows)),
            "resumable": {"judge_calls": pending},
            "judge_config": self.judge_config() | {"routes_returned": routes},
            "traces_report": {"file": self.config.options["traces"], "unknown_ids": self.traces.unknown_ids,
                              "duplicate_ids": self.traces.duplicate_ids,
                              "converted_from_messages": self.traces.converted_ids,
                              "missing_ids": [t.task_id for t in self.tasks if t.task_id not in self.traces.traces]},
        }
        body["tasks"] = body.pop("tasks")   # the rows last, after the numbers
        return body

    # --- reading a scores.json ------------------------------------------------------------------------------

    @staticmethod
    def _mapped(scores: Mapping[str, Any], run: Mapping[str, Any]) -> float | None:
        if run.get("score") is not None:
            return float(run["score"])
        scale = (scores.get("judge_config") or {}).get("likert") or {}
        return scale.get(str(run["rating"])) if run.get("rating") is not None else None

    @classmethod
    def results(cls, scores: Mapping[str, Any]) -> ItemResults:
        """The autorater's runs are the repeats: run n's mapped rating is row n."""
        rows = scores["tasks"]
        n_runs = max([len(r["runs"]) for r in rows] + [(scores.get("judge_config") or {}).get("num_runs", 1), 1])
        values = [[NAN] * len(rows) for _ in range(n_runs)]
        for j, row in enumerate(rows):
            if row["status"] == Status.MISSING:
                for r in range(n_runs):
                    values[r][j] = 0.0
            for run in row["runs"]:
                mapped = cls._mapped(scores, run)
                values[run["run"] - 1][j] = mapped if mapped is not None else NAN
        return ItemResults(
            ids=tuple(r["task_id"] for r in rows), values=values,
            scores={r["task_id"]: r["score"] for r in rows}, statuses={r["task_id"]: r["status"] for r in rows},
            attempted={r["task_id"]: r["status"] != Status.MISSING for r in rows},
            judges={r["task_id"]: {f"run{run['run']}": mapped for run in r["runs"]
                                   if (mapped := cls._mapped(scores, run)) is not None} for r in rows})


