"""Tokens and money: what a run used, and what a run will use before it runs.

Usage is what the endpoints reported, summed per stage and per model. An estimate makes
no call: it builds every request a run would send and counts characters, converting them
with the protocol's figures of about 3.3 characters per token for English and 1.5 for CJK
text. Estimates are labelled as such; only reported usage is a measurement.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalnb.core.run_config import RunConfig
from evalnb.records.stores import JsonlStore
from evalnb.core.chains import preview
from evalnb.core.errors import NotYet
from evalnb.core.tokens import estimate_tokens
from evalnb.core.types import CALL_STAGES, Prepared, Record
from evalnb.execution.batch.journal import batched_keys
from evalnb.stats.latency import measured_estimate
from evalnb.judges import retest as judge_retest



# Endpoints that bill nothing unless the parameters give them a price: the offline baselines,
# and a command run on this machine (a local model, a rater).
FREE_PROVIDERS = frozenset({"offline", "command"})


def endpoint_names(config: RunConfig) -> dict[str, str]:
    return {"model": config.model.name, **{role: j.name for role, j in config.judge_roles()}}


def cost_usd(model: str, input_tokens: float, output_tokens: float,
             prices: Mapping[str, Mapping[str, float]]) -> float | None:
    """Prices are US dollars per million tokens; None when the model has no price."""
    price = prices.get(model)
    if price is None:
        return None
    return (input_tokens * price["input"] + output_tokens * price["output"]) / 1e6


def usage_by_stage(config: RunConfig, stores: Mapping[str, Mapping[str, Record]]
                   ) -> dict[str, dict[str, dict[str, Any]]]:
    """Reported tokens per stage (``stores``: stage -> its records) and model, with cost where
    a price is given. A call whose reply reported no usage counts at its estimate (marked in
    its record); ``estimated_usage_calls``, present only when there are some, says how many."""
    names = endpoint_names(config)
    totals: dict[str, dict[str, dict[str, Any]]] = {}
    for stage, records in stores.items():
        rows: dict[str, dict[str, Any]] = defaultdict(
            lambda: {"calls": 0, "attempts": 0, "input_tokens": 0, "output_tokens": 0,
                     "reasoning_tokens": 0})
        for record in records.values():
            if not record.get("attempts"):
                continue   # decided without a call (out of context, exact match)
            endpoint = str(record["endpoint"])
            row = rows[names.get(endpoint, endpoint)]
            row["calls"] += 1
            row["attempts"] += record["attempts"]
            usage = record.get("usage") or {}
            row["input_tokens"] += usage.get("input_tokens", 0)
            # Reasoning tokens are already inside output_tokens: shown, not added.
            row["output_tokens"] += usage.get("output_tokens", 0)
            row["reasoning_tokens"] += usage.get("reasoning_tokens") or 0
            if usage.get("estimated"):   # the reply reported none: counted from the texts (not a zero)
                row["estimated_usage_calls"] = row.get("estimated_usage_calls", 0) + 1
            if record.get("batch"):   # answered inside a provider batch: billed at the batch price
                for key, value in (("batch_calls", 1), ("batch_input_tokens", usage.get("input_tokens", 0)),
                                   ("batch_output_tokens", usage.get("output_tokens", 0))):
                    row[key] = row.get(key, 0) + value
        for model, row in rows.items():
            batch_in, batch_out = row.get("batch_input_tokens", 0), row.get("batch_output_tokens", 0)
            row["cost_usd"] = cost_usd(model, row["input_tokens"] - batch_in, row["output_tokens"] - batch_out,
                                       config.prices)
            if "batch_calls" in row and row["cost_usd"] is not None:
                row["cost_usd"] += batch_cost_usd(model, batch_in, batch_out, config.prices) or 0.0
                row["batch_price"] = price_note(config.prices)
        totals[stage] = dict(rows)
    return totals


def batch_cost_usd(model: str, input_tokens: float, output_tokens: float,
                   prices: Mapping[str, Mapping[str, float]]) -> float | None:
    """Cost at the model's batch price (the price table's, else half the live price)."""
    from evalnb.execution.batch import batch_price
    price = batch_price(prices, model)
    return None if price is None else cost_usd(model, input_tokens, output_tokens, {model: price})


def price_note(prices: Mapping[str, Mapping[str, float]]) -> str:
    from evalnb.execution.batch import price_note as note
    return note(prices)


def quota_minutes(rate_limit: Mapping[str, float] | None, row: Mapping[str, Any]) -> float | None:
    """The shortest time a stage's calls to one endpoint can take under its rate limit (None:
    unmetered). Output is counted at the budgets, so where output tokens bind this is an upper
    bound of the true minimum."""
    if not rate_limit:
        return None
    from evalnb.providers.pacing import RateLimit, minimum_seconds
    totals = {"requests": row["to_make"], "input_tokens": row["est_input_tokens"],
              "output_tokens": row["max_output_tokens"]}
    return round(minimum_seconds(RateLimit(**rate_limit), totals) / 60, 2)


def minimum_run_minutes(rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Stages run one after another and the endpoints of a stage side by side."""
    per_stage = [max((r["min_minutes_under_rate_limit"] or 0.0 for r in rows if r["stage"] == stage), default=0.0)
                 for stage in dict.fromkeys(r["stage"] for r in rows)]
    if all(r["min_minutes_under_rate_limit"] is None for r in rows):
        return None
    return round(sum(per_stage), 2)


def usage_rows(usage: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Flat rows (stage, model, ...) for a table."""
    return [{"stage": stage, "model": model, **row}
            for stage, per_model in usage.items() for model, row in per_model.items()]


def estimate(config: RunConfig, bench: Any, tasks: Any, run_dir: Path,
             assumed_response_chars: int = 5000) -> list[dict[str, Any]]:
    """Calls, skips and estimated tokens and cost per stage and model, without a call.

    Judge calls for answers not generated yet assume every in-scope task is answered with
    ``assumed_response_chars`` characters (as long as a judge prompt keeps of a response):
    an upper bound. Output tokens are the requests' budgets: also an upper bound. A chained
    call whose needs are not answered yet (turn 2 of a conversation) is counted from its
    declaration, its prompt estimated on answers of that assumed length: the row's
    ``awaiting_answers`` says how many such calls it holds.
    """
    names = endpoint_names(config)
    modes = {names.get(role, role): e.mode for role, e in (("model", config.model), *config.judge_roles())}
    rows: dict[tuple[str, str], dict[str, Any]] = {}

    def assumed(key: str) -> Record:
        return {"key": key, "status": "ok", "text": "x" * assumed_response_chars, "placeholder": True}

    def tally(stage: str, calls: Any, done: Any) -> dict[str, Prepared]:
        """Count one stage's calls into ``rows``; return the prepared calls still to run."""
        stored = JsonlStore(run_dir / f"{stage}.jsonl").load()
        held = batched_keys(run_dir, stage)
        pending = {}
        for call in calls:
            model = names.get(call.endpoint, call.endpoint)
            r = rows.setdefault((stage, model), {"stage": stage, "model": model, "mode": modes.get(model, "live"),
                                                 "calls": 0, "skipped_no_call": 0, "already_done": 0,
                                                 "in_batches": 0, "to_make": 0,
                                                 "est_input_tokens": 0.0, "max_output_tokens": 0})
            r["calls"] += 1
            if call.key in stored and done(stored[call.key]):
                r["already_done"] += 1
                continue
            if call.key in held:   # submitted in a batch still running: paid for, not made again
                r["in_batches"] += 1
                continue
            # A chained call whose needs are not answered: prepared on assumed answers, said so.
            call, awaits = preview(call, {k: v for k, v in stored.items() if done(v)}, assumed)
            if awaits:
                r["awaiting_answers"] = r.get("awaiting_answers", 0) + 1
            try:
                pending[call.key] = prepared = call.prepare()
            except NotYet:   # a benchmark's own "not yet": a call to make, its size unknown
                r["awaiting_answers"] = r.get("awaiting_answers", 0) + (0 if awaits else 1)
                r["to_make"] += 1
                continue
            if prepared.request is None:
                r["skipped_no_call"] += 1
            else:
                r["to_make"] += 1
                r["est_input_tokens"] += estimate_tokens(prepared.request.text())
                r["max_output_tokens"] += prepared.request.max_tokens
        return pending

    responses = JsonlStore(run_dir / "generate.jsonl").load()
    for key, prepared in tally("generate", bench.generation_calls(), bench.generation_done).items():
        # Decided without a call (e.g. out of context) as recorded; otherwise assume an answer.
        responses[key] = dict(prepared.fields) if prepared.request is None else \
            {"status": "ok", "text": "x" * assumed_response_chars}
    judge_calls = bench.judge_calls(responses)
    tally("judge", judge_calls, bench.judge_done)
    if config.judge_retest:   # the retest study: sampled from every answer judged (before the run: assumed)
        tally(judge_retest.STAGE, judge_retest.retest_calls(config.judge_retest, judge_calls, None, bench.judge_done),
              bench.judge_done)

    limits = {names.get(role, role): e.rate_limit
              for role, e in (("model", config.model), *config.judge_roles())}
    # Measured where the run has finished calls: their median time, their mean output.
    stores = {stage: JsonlStore(run_dir / f"{stage}.jsonl").load() for stage in (*CALL_STAGES, judge_retest.STAGE)}
    parallel = {names.get(role, role): min(e.concurrency or config.concurrency, config.concurrency)
                for role, e in (("model", config.model), *config.judge_roles())}
    free = {e.name for e in (config.model, *config.judges) if e.provider in FREE_PROVIDERS}
    for r in rows.values():
        # A batch is not held to the live rate limit (the providers' batch limits are separate).
        r["min_minutes_under_rate_limit"] = quota_minutes(limits.get(r["model"]), r) if r["mode"] == "live" else None
        r["est_input_tokens"] = round(r["est_input_tokens"])
        r["est_input_cost_usd"] = cost_usd(r["model"], r["est_input_tokens"], 0, config.prices)
        r["max_total_cost_usd"] = cost_usd(r["model"], r["est_input_tokens"], r["max_output_tokens"],
                                           config.prices)
        # Live and batch side by side, whichever mode the endpoint is set to.
        r["max_total_cost_batch_usd"] = batch_cost_usd(r["model"], r["est_input_tokens"], r["max_output_tokens"],
                                                       config.prices)
        if r["model"] in free and r["model"] not in config.prices:   # an offline baseline or a local command
            r.update(est_input_cost_usd=0.0, max_total_cost_usd=0.0, max_total_cost_batch_usd=0.0, free=True)
        r |= measured_estimate(r["to_make"], [rec for rec in stores[r["stage"]].values()
                                              if names.get(str(rec["endpoint"]), rec["endpoint"]) == r["model"]],
                               parallel.get(r["model"], 1))
    return list(rows.values())
