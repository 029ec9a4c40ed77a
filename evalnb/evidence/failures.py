"""Why calls failed, per endpoint and cause, read from a run's stores (one place, many views).

Every view that says why a run is not complete reads :func:`failure_summary`: the line a
stage prints when it ends with failures, the exit-1 and exit-2 lines of ``evalnb run``,
``evalnb status``, the report notebook's first cell and ``evalnb show`` (one item's calls).

A *failure* is the latest line of a call (endpoint failures included) whose status
is a failure: ``failed_transient``, ``failed_permanent``, ``failed_endpoint``, or a judge's
``failed_parse``, ``judge_refused``, ``judge_empty``. Its *cause* is a short name read from
its error (:func:`cause_of`): ``connection refused``, ``HTTP 429``, ``authentication (HTTP
401)``, ``malformed reply`` ... Failures are grouped by stage and endpoint (the role in the
records, named with its provider, model and base URL without credentials), causes sorted by
count, each with one example message.

Only the standard library is imported here (``evalnb status`` stays light); pandas only by
:func:`summary_table`, when called.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from evalnb.records.stores import latest_records, read_lines
from evalnb.core.redaction import redact
from evalnb.core.types import CALL_STAGES, FAILED_ENDPOINT

if TYPE_CHECKING:
    import pandas as pd

EXAMPLE_CHARS = 200
JUDGE_FAILURES = frozenset({"failed_parse", "judge_refused", "judge_empty"})
ANSWERED = frozenset({"ok", "refused", "empty"})   # the contestant said something

# Error codes evalnb gives failures that carry no HTTP status, as a reader names them.
CODE_NAMES = {"connection_refused": "connection refused", "dns_failure": "DNS failure",
              "connect_failed": "could not connect",
              "connection_dropped": "connection dropped", "malformed_reply": "malformed reply",
              "stream_timeout": "stream stalled", "stream_broken": "stream broke", "stream_error": "stream error event",
              "not_sent": "not sent", "unexpected": "unexpected error", "batch_failed": "batch failed",
              "batch_expired": "batch request expired", "batch_missing": "batch request missing"}


def is_failure(record: Mapping[str, Any]) -> bool:
    status = str(record.get("status", ""))
    return status.startswith("failed_") or status in JUDGE_FAILURES


def cause_of(record: Mapping[str, Any]) -> str:
    """A failure's cause, short: what a reader needs to know what to fix."""
    status = str(record.get("status"))
    error = record.get("error") or {}
    if status == "failed_parse":
        return "judge reply without a verdict"
    if status in ("judge_refused", "judge_empty"):
        return status.replace("_", " ")
    http = f"HTTP {error['status_code']}" if error.get("status_code") else None
    if status == FAILED_ENDPOINT:
        return f"{error.get('cause') or 'endpoint refused'} ({http or 'no status'})"
    code = error.get("code")
    if code in CODE_NAMES:
        return CODE_NAMES[code]
    if http:
        if "context window" in str(error.get("message", "")):
            return f"context length ({http})"
        return f"{http} {code}" if code else http
    message = str(error.get("message") or "")
    head = message.split(":", 1)[0]
    return head if head and " " not in head else "error"   # an exception's name (APITimeoutError)


def example_of(record: Mapping[str, Any]) -> str:
    error = record.get("error") or {}
    text = " ".join(str(error.get("message") or record.get("status")).split())
    return redact(text[:EXAMPLE_CHARS] + ("…" if len(text) > EXAMPLE_CHARS else ""))


@dataclass(frozen=True)
class Endpoint:
    role: str
    provider: str
    model: str
    base_url: str | None

    def __str__(self) -> str:
        where = f" at {self.base_url}" if self.base_url else ""
        return f"{self.role} ({self.provider} {self.model}{where})"


@dataclass
class Cause:
    cause: str
    count: int
    example: str
    statuses: Counter[str] = field(default_factory=Counter)


@dataclass
class EndpointFailures:
    """One endpoint's failures in one stage."""

    stage: str
    endpoint: Endpoint
    causes: list[Cause]
    stopped: Mapping[str, Any] | None = None   # its latest endpoint failure, if any

    @property
    def count(self) -> int:
        return sum(c.count for c in self.causes)


def without_credentials(url: str | None) -> str | None:
    """A base URL as it may be shown: no user or password, no query (``?key=``), no fragment."""
    if not url:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def endpoints_of(config: Mapping[str, Any]) -> dict[str, Endpoint]:
    """Role in the records -> the endpoint, from a resolved configuration (config.json)."""
    def one(role: str, e: Mapping[str, Any]) -> Endpoint:
        return Endpoint(role, str(e.get("provider")), str(e.get("name")), without_credentials(e.get("base_url")))
    return {"model": one("model", config.get("model") or {}),
            **{f"judge{i}": one(f"judge{i}", j) for i, j in enumerate(config.get("judges") or [], start=1)}}


def run_config(run_dir: Path) -> dict[str, Any]:
    try:
        value = json.loads((run_dir / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


StageRecords = Mapping[str, Mapping[str, Mapping[str, Any]]]
"""Stage -> the latest record of each of its calls, endpoint failures included: what a caller
that has read the stores already passes, so they are not read again."""


def stage_latest(run_dir: Path, stage: str, records: StageRecords | None = None) -> Mapping[str, Mapping[str, Any]]:
    """A stage's latest record per call: from ``records`` when it holds the stage, else read
    from its store, read only (:func:`evalnb.records.stores.latest_records`)."""
    if records is not None and stage in records:
        return records[stage]
    return latest_records(Path(run_dir) / f"{stage}.jsonl")


def failure_summary(run_dir: Path, stages: Sequence[str] = CALL_STAGES,
                    config: Mapping[str, Any] | None = None,
                    records: StageRecords | None = None) -> list[EndpointFailures]:
    """Per stage and endpoint, the count of each failure cause with one example message
    (``records``: the stages' latest records, when the caller has them)."""
    run_dir = Path(run_dir)
    endpoints = endpoints_of(config if config is not None else run_config(run_dir))
    out: list[EndpointFailures] = []
    for stage in stages:
        grouped: dict[str, dict[str, Cause]] = {}
        stopped: dict[str, Mapping[str, Any]] = {}
        for record in stage_latest(run_dir, stage, records).values():
            if not is_failure(record):
                continue
            role = str(record.get("endpoint"))
            cause = cause_of(record)
            entry = grouped.setdefault(role, {}).setdefault(cause, Cause(cause, 0, example_of(record)))
            entry.count += 1
            entry.statuses[str(record.get("status"))] += 1
            if record.get("status") == FAILED_ENDPOINT and \
                    float(record.get("started_at") or 0) >= float((stopped.get(role) or {}).get("started_at") or 0):
                stopped[role] = record
        for role, causes in grouped.items():
            endpoint = endpoints.get(role) or Endpoint(role, "?", "?", None)
            ordered = sorted(causes.values(), key=lambda c: (-c.count, c.cause))
            out.append(EndpointFailures(stage, endpoint, ordered, stopped.get(role)))
    return out


def summary_lines(summary: Sequence[EndpointFailures], indent: str = "  ") -> list[str]:
    """``judge, judge2 (openai judge-2 at http://…/v1): 3 calls failed`` and, under it, one line
    per cause: ``2 connection refused (failed_transient), e.g. connection refused: 127.0.0.1:9``."""
    lines: list[str] = []
    for entry in summary:
        lines.append(f"{entry.stage}, {entry.endpoint}: {entry.count} call{'s' if entry.count != 1 else ''} failed")
        for c in entry.causes:
            statuses = ", ".join(sorted(c.statuses))
            lines.append(f"{indent}{c.count} {c.cause} ({statuses}), e.g. {c.example}")
    return lines


def dominant(summary: Sequence[EndpointFailures]) -> tuple[EndpointFailures, Cause] | None:
    """The endpoint and cause with the most failures."""
    pairs = [(entry, cause) for entry in summary for cause in entry.causes]
    return max(pairs, key=lambda p: p[1].count) if pairs else None


def stop_line(stopped: Sequence[EndpointFailures], unanswered: int | None = None) -> str:
    """The one line a command ends with after an endpoint failure (exit 1)."""
    parts = []
    for entry in stopped:
        error = (entry.stopped or {}).get("error") or {}
        parts.append(f"the {entry.stage} endpoint {entry.endpoint} refused the request: "
                     f"{redact(' '.join(str(error.get('message', '')).split()))} "
                     f"[{error.get('cause') or 'endpoint failure'}]")
    left = f"; {unanswered} calls stay unanswered" if unanswered else ""
    return ("; ".join(parts) + f". Its calls were stopped and nothing was scored{left}. Fix the endpoint "
            "(its key, model name, URL or account) and run the same command again to resume.")


def stopped_in(summary: Sequence[EndpointFailures], lines: Sequence[Mapping[str, Any]]) -> list[EndpointFailures]:
    """The endpoints an endpoint failure among ``lines`` (what one pass of a stage wrote, live or
    collected from a batch) stopped, each with its first such line."""
    first: dict[str, Mapping[str, Any]] = {}
    for line in lines:
        if line.get("status") == FAILED_ENDPOINT:
            first.setdefault(str(line.get("endpoint")), line)
    return [replace(e, stopped=first[e.endpoint.role]) for e in summary if e.endpoint.role in first]


def incomplete_line(run_dir: Path) -> str:
    """What an exit 2 says: which endpoints left which work resumable, and why."""
    summary = failure_summary(run_dir)
    if not summary:
        return "calls remain to be made; run the same command again to resume"
    named = "; ".join(f"{e.stage}, {e.endpoint}: " + ", ".join(f"{c.count} {c.cause}" for c in e.causes)
                      for e in summary)
    top = dominant(summary)
    example = f" (e.g. {top[1].example})" if top else ""
    return f"resumable work remains: {named}{example}; run the same command again to resume"


def no_answer_line(run_dir: Path, records: StageRecords | None = None) -> str | None:
    """None when the generate stage produced an answer (or made no call); else what a later
    stage says instead of pretending to judge or aggregate nothing."""
    generated = stage_latest(run_dir, "generate", records)
    if not generated or any(r.get("status") in ANSWERED for r in generated.values()):
        return None
    failures = failure_summary(run_dir, ("generate",), records={"generate": generated})
    why = "; ".join(f"{e.endpoint}: " + ", ".join(f"{c.count} {c.cause}, e.g. {c.example}" for c in e.causes)
                    for e in failures)
    return f"the generate stage produced no answer ({why or 'no call answered'})"


def failure_rows(run_dir: Path) -> list[tuple[str, str]]:
    """The summary as rows of a stage notebook's first output (``evalnb.about``): one per stage
    and endpoint, and the generate stage's lack of any answer, if so."""
    rows = [(f"failed: {e.stage}, {e.endpoint}",
             f"{e.count} calls: " + "; ".join(f"{c.count} {c.cause}, e.g. {c.example}" for c in e.causes))
            for e in failure_summary(run_dir)]
    if nothing := no_answer_line(run_dir):
        rows.insert(0, ("no answer", nothing))
    return rows


def summary_table(run_dir: Path, records: StageRecords | None = None) -> pd.DataFrame:
    """The summary as a table (the report's first cell): stage, endpoint, cause, calls, example
    (``records``: the stages' latest records, when the caller has them)."""
    import pandas as pd

    from evalnb.views.tables import readable

    rows = [(e.stage, str(e.endpoint), c.cause, c.count, c.example)
            for e in failure_summary(run_dir, records=records) for c in e.causes]
    return readable(pd.DataFrame(rows, columns=["stage", "endpoint", "cause", "calls", "example"]))


def item_calls(run_dir: Path, item_id: str) -> list[str]:
    """Every call of one item, each stage's lines in order, with its status, attempts and error
    (``evalnb show``): what was tried, how often, and what came back."""

    lines: list[str] = []
    for stage in CALL_STAGES:
        for record in read_lines(Path(run_dir) / f"{stage}.jsonl"):
            key = str(record.get("key"))
            if key != item_id and not key.startswith(f"{item_id}::"):
                continue
            error = record.get("error") or {}
            line = (f"{stage} {key} ({record.get('endpoint')}): {record.get('status')}, "
                    f"{record.get('attempts', 0)} attempt{'s' if record.get('attempts') != 1 else ''}")
            if error:
                line += f"; {cause_of(record)}: {example_of(record)}"
            for retried in record.get("retried_errors") or ():
                line += f"\n    retried after: {' '.join(str(retried).split())}"
            lines.append(line)
    return [redact(line) for line in lines]


DEFAULT_MAX_FAILED = 0.5
"""compare and a suite's leaderboard refuse a run more than this share of whose items ended in a
failure (``failed_permanent``): such a run says more about its endpoint than about its model.
A run all of whose items failed is refused whatever the threshold."""


def failed_items(statuses: Mapping[str, str]) -> int:
    return sum(1 for s in statuses.values() if str(s).startswith("failed_"))


def did_not_run(run_dir: Path, statuses: Mapping[str, str], max_failed: float = DEFAULT_MAX_FAILED) -> str | None:
    """Why a finished run is no result to compare (all, or more than ``max_failed`` of its items
    failed), naming the run and its dominant cause; None when it may be compared."""
    n, failed = len(statuses), failed_items(statuses)
    if not n or not failed or (failed < n and failed / n <= max_failed):
        return None
    top = dominant(failure_summary(run_dir))
    cause = f"{top[1].cause} from {top[0].endpoint}, e.g. {top[1].example}" if top else "see its records"
    return (f"{run_dir}: {failed} of {n} items ended in failure, mostly {cause}: the run did not run, and is "
            f"not compared (at most {max_failed:g} of a run's items may have failed: --max-failed)")


def incomplete_cause(run_dir: Path) -> str:
    """The dominant cause of a run's resumable work, for a refusal to compare it."""
    top = dominant(failure_summary(run_dir))
    return f"{top[1].count} {top[1].cause} from {top[0].endpoint}, e.g. {top[1].example}" if top else \
        "calls not yet made"


def run_did_not_run(run_dir: Path, max_failed: float = DEFAULT_MAX_FAILED) -> str | None:
    """:func:`did_not_run` of a finished run directory, read from its scores.json by its benchmark."""
    from evalnb.benchmarks import benchmark_for

    try:
        scores = json.loads((Path(run_dir) / "scores.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    statuses = benchmark_for(scores["benchmark"], str(run_dir)).results(scores).statuses
    return did_not_run(Path(run_dir), statuses, max_failed)
