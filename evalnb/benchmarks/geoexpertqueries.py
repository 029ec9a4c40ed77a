"""GeoExpertQueries: agent trajectories rated 0/1/2 by an autorater, three independent runs.

Reference: the GeoExpertQueries protocol (§2, the pins table) and spec README readings
16-17. Each trajectory is condensed to text; the autorater prompt follows a
``Today is YYYY-MM-DD.`` header; each of ``num_runs`` calls must yield a rating of 0, 1 or
2, mapped through the likert file (0 -> 0.0, 1 -> 0.5, 2 -> 1.0) and averaged. A rating
that does not parse is a judge failure: resumable, never a zero.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from evalnb import prompts, stats
from evalnb.config import RunConfig
from evalnb.data import json_records, require
from evalnb.errors import ConfigError
from evalnb.judging import JudgeReplyError, as_number, field_of
from evalnb.providers.base import ChatRequest, Completion
from evalnb.records import read_json_if_exists
from evalnb.runner import Call, Prepared, Record
from evalnb.trajectories import DEFAULT_OUTPUT_CHARS, DEFAULT_TOTAL_CHARS, condense, read_traces

NAME = "geoexpertqueries"
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
    "n_boot": stats.N_BOOT,
    "seed": 0,
}
PATH_OPTIONS = ("traces", "prompt_file", "likert_file")
COMPARABLE_PARTS = ("rating", "aggregation", "retry", "tasks")
PROMPT_FILES = {"tool_agnostic": "geoexpertqueries_tool_agnostic.txt",
                "workflow": "geoexpertqueries_workflow.txt"}
# Reading 24: what each variant's prompt file must hold, and what else evalnb fills in.
REQUIRED_PLACEHOLDERS = {"tool_agnostic": ("query", "trajectory"),
                         "workflow": ("query", "trajectory", "tools")}
FILLED_PLACEHOLDERS = ("query", "reference", "trajectory", "tools")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
AGGREGATION_POLICY = ("geoexpertqueries/1: case score = mean of the mapped ratings of all runs, only when "
                      "every run parsed; missing trace = 0; overall = mean over all queries")


@dataclass(frozen=True)
class ExpertQuery:
    task_id: str
    query: str
    reference: str


def read_queries(path: Path) -> list[ExpertQuery]:
    queries = []
    for where, raw, query_id in json_records(path, "queries"):
        reference = raw.get("reference", raw.get("golden"))
        if reference is not None and not isinstance(reference, str):
            reference = json.dumps(reference, ensure_ascii=False)
        queries.append(ExpertQuery(query_id, require(raw, "query", str, where), reference or "(none)"))
    return queries


# --- configuration ------------------------------------------------------------------------------

def _path(value: Any) -> Path | None:
    return Path(value) if value else None


def _read(config: RunConfig, key: str, default: str) -> prompts.PromptFile:
    try:
        return prompts.read_prompt_file(_path(config.options[key]), default)
    except ConfigError as e:
        raise config.error(key, str(e)) from None


def prompt_file(config: RunConfig) -> prompts.PromptFile:
    return _read(config, "prompt_file", PROMPT_FILES[config.options["prompt_variant"]])


def placeholders(text: str) -> set[str]:
    """The ``{name}`` placeholders in a prompt file (JSON braces in it are not names)."""
    return set(re.findall(r"\{(\w+)\}", text))


def check_placeholders(config: RunConfig) -> list[str]:
    """Reading 24: refuse a prompt file that would silently drop the trajectory or the query."""
    variant, file = config.options["prompt_variant"], prompt_file(config)
    found = placeholders(file.text)
    missing = [name for name in REQUIRED_PLACEHOLDERS[variant] if name not in found]
    if missing:
        raise config.error("prompt_file", f"{file.path} lacks {', '.join('{' + m + '}' for m in missing)}, "
                           f"which the {variant} variant needs (it takes "
                           f"{', '.join('{' + n + '}' for n in REQUIRED_PLACEHOLDERS[variant])}; "
                           "{reference} is optional): without them the autorater would rate nothing")
    warnings = []
    if "reference" not in found:
        warnings.append(f"prompt_file {file.path} has no {{reference}}: the queries' reference material "
                        "is not sent to the autorater")
    unknown = sorted(found - set(FILLED_PLACEHOLDERS))
    if unknown:
        warnings.append(f"prompt_file {file.path}: {', '.join('{' + u + '}' for u in unknown)} "
                        f"{'is' if len(unknown) == 1 else 'are'} not filled by evalnb and will be sent as written")
    return warnings


def likert(config: RunConfig) -> tuple[dict[str, float], str]:
    """The rating map and its file's sha256."""
    file = _read(config, "likert_file", "likert_scales.json")
    try:
        scale = json.loads(file.text)
    except json.JSONDecodeError as e:
        raise config.error("likert_file", f"{file.path} is not JSON ({e.msg})") from None
    if not isinstance(scale, dict) or set(scale) != {"0", "1", "2"} or not all(
            stats.is_finite(v) for v in scale.values()):
        raise config.error("likert_file", f"{file.path}: expected {{\"0\": x, \"1\": y, \"2\": z}} with numbers")
    return {k: float(v) for k, v in scale.items()}, file.sha256


def rating_date(config: RunConfig) -> str:
    """Reading 16: the parameter, else the date this run started (kept across resumes)."""
    if config.options["rating_date"]:
        return str(config.options["rating_date"])   # a YAML date arrives as its ISO string
    started = read_json_if_exists(config.output_dir / "fingerprint.json")
    if started and "rating" in started["parts"]:
        return started["parts"]["rating"]["value"]["date"]
    return datetime.now(timezone.utc).date().isoformat()


def check_rating_date(config: RunConfig) -> None:
    """Reading 16: exactly YYYY-MM-DD and a real date (a YAML date was made one by config)."""
    value = config.options["rating_date"]
    if value is None:
        return
    # fullmatch first: date.fromisoformat also takes 20260314 and 2026-W11-6.
    try:
        ok = isinstance(value, str) and bool(_DATE.fullmatch(value)) and bool(date.fromisoformat(value))
    except ValueError:
        ok = False
    if not ok:
        raise config.error("rating_date", f"expected a date YYYY-MM-DD (e.g. 2026-03-14), got {value!r}")


def check_config(config: RunConfig) -> list[str]:
    o = config.options
    if not o["traces"] or not isinstance(o["traces"], str):
        raise config.error("traces", "required, the JSONL file of agent trajectories")
    if o["prompt_variant"] not in PROMPT_FILES:
        raise config.error("prompt_variant", f"expected one of {', '.join(PROMPT_FILES)}, got {o['prompt_variant']!r}")
    if len(config.judges) != 1:
        raise config.error("judges", "the autorater is exactly one judge (the report: Gemini 3.8 Flash)")
    for key in ("num_runs", "judge_max_tokens", "max_output_chars", "max_trajectory_chars", "n_boot"):
        if not isinstance(o[key], int) or isinstance(o[key], bool) or o[key] < 1:
            raise config.error(key, f"expected a positive integer, got {o[key]!r}")
    if not isinstance(o["seed"], int) or isinstance(o["seed"], bool):
        raise config.error("seed", f"expected an integer, got {o['seed']!r}")
    if not isinstance(o["available_tools"], list) or not all(isinstance(t, str) for t in o["available_tools"]):
        raise config.error("available_tools", "expected a list of tool names (or descriptions)")
    check_rating_date(config)
    warnings = check_placeholders(config)
    likert(config)
    if o["prompt_variant"] == "workflow" and not o["available_tools"]:
        warnings.append("workflow prompt with no available_tools: the prompt will list none")
    return warnings


def load_tasks(config: RunConfig) -> list[ExpertQuery]:
    queries = read_queries(config.data)
    read_traces(Path(config.options["traces"]), [q.task_id for q in queries])   # validated now
    return queries


def judge_config(config: RunConfig) -> dict[str, Any]:
    o = config.options
    scale, scale_sha = likert(config)
    judge = config.judges[0]
    return {"model": judge.name, "provider": judge.provider, "temperature": "model default (not sent)",
            "max_tokens": o["judge_max_tokens"], "prompt_variant": o["prompt_variant"],
            "prompt_file": prompt_file(config).record(), "date_header": f"Today is {rating_date(config)}.",
            "available_tools": o["available_tools"] if o["prompt_variant"] == "workflow" else None,
            "likert": scale, "likert_sha256": scale_sha, "num_runs": o["num_runs"],
            "condensation": {"max_output_chars": o["max_output_chars"],
                             "max_trajectory_chars": o["max_trajectory_chars"]}}


def fingerprint_parts(config: RunConfig, tasks: Sequence[ExpertQuery]) -> dict[str, Any]:
    traces = Path(config.options["traces"]).read_bytes()
    return {
        "rating": {**judge_config(config), "date": rating_date(config)},
        "traces_sha256": hashlib.sha256(traces).hexdigest(),
        "aggregation": AGGREGATION_POLICY,
        "retry": asdict(config.retry),
        "tasks": hashlib.sha256(json.dumps([asdict(t) for t in tasks], sort_keys=True).encode()).hexdigest(),
    }


# --- "generation": the trajectories, condensed ---------------------------------------------------

def _condensed(task: ExpertQuery, config: RunConfig, traces: Any) -> Prepared:
    fields = {"task_id": task.task_id, "source": "traces"}
    trace = traces.traces.get(task.task_id)
    if trace is None:
        return Prepared(None, fields | {"status": "missing", "text": None})
    text = condense(trace, output_chars=config.options["max_output_chars"],
                    total_chars=config.options["max_trajectory_chars"])
    return Prepared(None, fields | {"status": "ok", "text": text, "steps": len(trace["steps"]),
                                    "converted_from_messages": task.task_id in traces.converted_ids})


def generation_calls(config: RunConfig, tasks: Sequence[ExpertQuery]) -> list[Call]:
    traces = read_traces(Path(config.options["traces"]), [t.task_id for t in tasks])
    return [Call(t.task_id, "model", functools.partial(_condensed, t, config, traces)) for t in tasks]


def generation_done(record: Record) -> bool:
    return True   # read from a file: nothing to resume


# --- rating (readings 16, 17) --------------------------------------------------------------------

def rating_template(config: RunConfig) -> str:
    """The date header and the prompt file: the same for every trace, placeholders unfilled."""
    return f"Today is {rating_date(config)}.\n\n{prompt_file(config).text}"


def tools_text(config: RunConfig) -> str:
    return "\n".join(f"- {t}" for t in config.options["available_tools"]) or "(none listed)"


def rating_prompt(template: str, task: ExpertQuery, trajectory: str, tools: str) -> str:
    # One pass over all four: a tool description or a query holding "{trajectory}" is sent as written.
    return prompts.fill(template, {"query": task.query, "reference": task.reference,
                                   "trajectory": trajectory, "tools": tools})


_RATING_LINE = re.compile(r"\brating\b\W{0,6}([0-9])\b", re.I)


def parse_rating(reply: str, scale: Mapping[str, float]) -> int:
    """A rating in the scale, from a JSON ``rating`` field or a ``Rating: N`` line."""
    try:
        value, _ = field_of(reply, "rating")
    except JudgeReplyError:
        lines = _RATING_LINE.findall(reply)
        if not lines:
            raise
        value = lines[-1]
    number = as_number(value)
    if number is None or not number.is_integer() or str(int(number)) not in scale:
        raise JudgeReplyError(f"rating {value!r} is not one of {', '.join(scale)}")
    return int(number)


def read_rating(completion: Completion, scale: Mapping[str, float]) -> dict[str, Any]:
    if completion.status != "ok":
        return {"status": f"judge_{completion.status}", "text": completion.text,
                "error": {"kind": "judge", "message": f"autorater reply was {completion.status}"}}
    try:
        rating = parse_rating(completion.text, scale)
    except JudgeReplyError as e:
        return {"status": "failed_parse", "text": completion.text, "error": {"kind": "parse", "message": str(e)}}
    return {"status": "ok", "text": completion.text, "rating": rating, "score": scale[str(rating)]}


def judge_calls(config: RunConfig, tasks: Sequence[ExpertQuery], responses: Mapping[str, Record]) -> list[Call]:
    scale, _ = likert(config)
    template, tools = rating_template(config), tools_text(config)
    calls = []
    for task in tasks:
        response = responses.get(task.task_id)
        if response is None or response["status"] != "ok":
            continue
        request = ChatRequest(rating_prompt(template, task, response["text"], tools),
                              max_tokens=config.options["judge_max_tokens"], temperature=None)
        for run in range(1, config.options["num_runs"] + 1):
            fields = {"task_id": task.task_id, "run": run}
            calls.append(Call(f"{task.task_id}::run{run}", "judge1", functools.partial(Prepared, request, fields),
                              functools.partial(read_rating, scale=scale)))
    return calls


def judge_done(record: Record) -> bool:
    return record["status"] == "ok"


# --- aggregation -----------------------------------------------------------------------------------

def agreement(ratings: Sequence[Sequence[int]]) -> dict[str, Any]:
    """How often independent runs disagree, over queries with every run rated."""
    if not ratings:
        return {"queries": 0, "unanimous_share": None, "max_spread_share": None, "mean_range": None}
    ranges = [max(r) - min(r) for r in ratings]
    return {"queries": len(ratings), "unanimous_share": sum(x == 0 for x in ranges) / len(ranges),
            "max_spread_share": sum(x == 2 for x in ranges) / len(ranges),
            "mean_range": sum(ranges) / len(ranges)}


def score(config: RunConfig, tasks: Sequence[ExpertQuery], responses: Mapping[str, Record],
          judgements: Mapping[str, Record]) -> dict[str, Any]:
    runs = range(1, config.options["num_runs"] + 1)
    scale, _ = likert(config)
    rows: list[dict[str, Any]] = []
    complete_ratings: list[list[int]] = []
    pending = 0
    for task in tasks:
        response = responses.get(task.task_id)
        status = response["status"] if response else "pending"
        verdicts = [judgements.get(f"{task.task_id}::run{n}") for n in runs]
        ratings: list[int | None] = [v["rating"] if v and v["status"] == "ok" else None for v in verdicts]
        value: float | None
        if status == "ok":
            rated = [r for r in ratings if r is not None]
            value = sum(scale[str(r)] for r in rated) / len(rated) if len(rated) == len(ratings) else None
            pending += len(ratings) - len(rated)
            if value is not None:
                complete_ratings.append(rated)
        else:
            value = 0.0 if status == "missing" else None
            pending += status != "missing"
        rows.append({"task_id": task.task_id, "status": status, "score": value, "ratings": ratings,
                     "runs": [{"run": n, "status": v["status"] if v else "pending", "rating": r,
                               "reply": v.get("text") if v else None, "error": v.get("error") if v else None}
                              for n, v, r in zip(runs, verdicts, ratings)] if status == "ok" else []})
    complete = pending == 0
    scores: list[float] = [r["score"] or 0.0 for r in rows]   # all present when complete
    n_boot, seed = config.options["n_boot"], config.options["seed"]
    traces = read_traces(Path(config.options["traces"]), [t.task_id for t in tasks])
    routes = sorted({v["model_route"] for v in judgements.values() if v.get("model_route")})
    return {
        "complete": complete,
        "overall": stats.mean(scores) if complete else None,
        "n": len(tasks),
        "ci": {"overall": stats.bootstrap_ci(scores, n_boot=n_boot, seed=seed).as_dict()} if complete else None,
        "rating_counts": {str(k): sum(r.count(k) for r in complete_ratings) for k in (0, 1, 2)},
        "agreement": agreement(complete_ratings),
        "status_counts": dict(Counter(r["status"] for r in rows)),
        "resumable": {"judge_calls": pending},
        "judge_config": judge_config(config) | {"routes_returned": routes},
        "traces_report": {"file": config.options["traces"], "unknown_ids": traces.unknown_ids,
                          "duplicate_ids": traces.duplicate_ids, "converted_from_messages": traces.converted_ids,
                          "missing_ids": [t.task_id for t in tasks if t.task_id not in traces.traces]},
        "tasks": rows,
    }


# --- comparison across runs ------------------------------------------------------------------

def items(scores: Mapping[str, Any]) -> dict[str, tuple[float | None, bool]]:
    """Query -> (score, attempted: a trajectory existed)."""
    return {r["task_id"]: (r["score"], r["status"] != "missing") for r in scores["tasks"]}


def verdicts(scores: Mapping[str, Any]) -> list[tuple[str, str, float]]:
    """(query, run, mapped rating): the independent runs play the panel's part."""
    scale = scores["judge_config"]["likert"]
    return [(r["task_id"], f"run{run['run']}", scale[str(run["rating"])])
            for r in scores["tasks"] for run in r["runs"] if run["rating"] is not None]
