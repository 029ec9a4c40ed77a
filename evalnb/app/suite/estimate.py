"""``evalnb estimate SUITE.yaml``: the contestants' estimates summed, and the shortest time
the suite can take under its quotas with its shared endpoints shared.

Each contestant's rows are what ``evalnb estimate`` prints for its run
(:func:`evalnb.pipeline.accounting.estimate`: no call, nothing written). The shortest time is a
lower bound, the larger of

- for every endpoint (provider, base URL, model, key variable: one quota), the
  shortest time all the suite's live calls to it take under its ``rate_limit``
  (:func:`evalnb.providers.pacing.minimum_seconds` over the summed requests, estimated input and
  output budgets): the three judges of a panel carry every contestant's verdicts;
- for every contestant, its own run's shortest time (stages in turn, as ``evalnb estimate``).

It assumes ``parallel_runs`` lets the runs overlap as much as the quotas allow; fewer runs in
flight than that can only take longer. Where contestants give one endpoint different rate
limits, the smallest of each kind is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalnb.app import output
from evalnb.app.suite.config import load_suite
from evalnb.config import EndpointConfig
from evalnb.providers.ledger import endpoint_identity
from evalnb.providers.pacing import RateLimit, minimum_seconds
from evalnb.pipeline.accounting import estimate, minimum_run_minutes

SUMMED = ("to_make", "est_input_tokens", "max_output_tokens", "max_total_cost_usd", "max_total_cost_batch_usd")


def estimate_suite(path: Path, sets: Sequence[str]) -> int:
    import pandas as pd

    suite = load_suite(path, sets, require_keys=False)
    for contestant in suite.contestants:
        output.warnings(contestant.benchmark.warnings, f"{contestant.name}: ")
    per_run: list[dict[str, Any]] = []
    shared: dict[str, dict[str, Any]] = {}
    longest_run = 0.0
    for contestant in suite.contestants:
        config, bench = contestant.config, contestant.benchmark
        rows = estimate(config, bench, bench.tasks, config.output_dir)
        longest_run = max(longest_run, minimum_run_minutes(rows) or 0.0)
        total: dict[str, Any] = {"contestant": contestant.name, "model": config.model.name}
        for key in SUMMED:
            values = [r[key] for r in rows]
            total[key] = None if any(v is None for v in values) and key.endswith("usd") else \
                sum(v or 0 for v in values)
        per_run.append(total)
        endpoints = {e.name: e for e in (config.model, *config.judges)}   # estimate's rows are per model name
        for row in rows:
            endpoint = endpoints.get(row["model"])
            if endpoint is not None and row["mode"] == "live" and endpoint.rate_limit:
                _add(shared, endpoint, row)
    from evalnb.views.tables import Layout, paper_view, view_text

    table = pd.DataFrame(per_run)
    # the one table style: counts as integers, costs with cents, the vocabulary's headers
    print(view_text(paper_view(table, Layout(decimals=2))))
    sums = {k: (None if table[k].isna().any() else float(table[k].sum())) for k in SUMMED}
    print(f"suite {suite.name}: {len(per_run)} contestants, {sums['to_make']:,.0f} calls to make, "
          f"{sums['est_input_tokens']:,.0f} estimated input tokens, {sums['max_output_tokens']:,.0f} output tokens "
          "at most" + (f"; at most ${sums['max_total_cost_usd']:,.2f} live, ${sums['max_total_cost_batch_usd']:,.2f} "
                       "in batch mode" if sums["max_total_cost_usd"] is not None else "; cost: some model has no price"))
    if suite.max_cost_usd is not None and sums["max_total_cost_usd"] is not None:
        within = sums["max_total_cost_usd"] <= suite.max_cost_usd
        print(f"budget: ${suite.max_cost_usd:,.2f} for the whole suite: "
              + ("the upper bound fits" if within else "the upper bound passes it; the suite stops at the ceiling "
                                                       "with work left resumable unless the real usage is lower"))
    endpoint_minutes = {key: round(minimum_seconds(v["limit"], v["totals"]) / 60, 2) for key, v in shared.items()}
    for key, minutes in sorted(endpoint_minutes.items(), key=lambda kv: -kv[1]):
        print(f"  {key}: {minutes:g} minutes under its rate limit for every contestant's calls")
    if endpoint_minutes or longest_run:
        shortest = max([*endpoint_minutes.values(), longest_run])
        print(f"Shortest time under the configured rate limits: {shortest:g} minutes for the whole suite (a lower "
              f"bound: shared endpoints carry every contestant's calls; the longest run alone takes {longest_run:g}; "
              f"parallel_runs {suite.parallel_runs}).")
    print("ESTIMATE, no call made: input tokens are characters / 3.3 (English) or / 1.5 (CJK); output tokens and "
          "judge calls for answers not yet generated are upper bounds (every in-scope task answered, every budget used).")
    return 0


def _add(shared: dict[str, dict[str, Any]], endpoint: EndpointConfig, row: dict[str, Any]) -> None:
    """Sum a row into its endpoint's quota (one per endpoint identity, whatever the role)."""
    identity = endpoint_identity(endpoint.provider, endpoint.base_url, endpoint.name, endpoint.api_key_env)
    key = f"{identity['provider']}:{identity['model']}" + (f" at {identity['base_url']}" if identity["base_url"] else "") \
        + (f" key {identity['api_key_env']}" if identity["api_key_env"] else "")
    entry = shared.setdefault(key, {"limit": None, "totals": {"requests": 0.0, "input_tokens": 0.0,
                                                              "output_tokens": 0.0}})
    limit = RateLimit(**endpoint.rate_limit) if endpoint.rate_limit else RateLimit()
    old = entry["limit"]
    if old is not None:   # the smallest of each kind, should contestants disagree
        def smaller(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else min(a, b)
        limit = RateLimit(smaller(old.requests_per_minute, limit.requests_per_minute),
                          smaller(old.input_tokens_per_minute, limit.input_tokens_per_minute),
                          smaller(old.output_tokens_per_minute, limit.output_tokens_per_minute),
                          min(old.window_seconds, limit.window_seconds))
    entry["limit"] = limit
    totals = entry["totals"]
    totals["requests"] += row["to_make"]
    totals["input_tokens"] += row["est_input_tokens"]
    totals["output_tokens"] += row["max_output_tokens"]
