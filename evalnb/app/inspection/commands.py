"""``evalnb estimate``, ``evalnb probe-window`` and ``evalnb show``: looking at a run before
and after, making no call (probe-window makes only its probes) and writing no record."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from evalnb.app import EXIT_OK, output
from evalnb.app.inspection.estimate_view import WIDTH, estimate_table
from evalnb.app.live import live_progress
from evalnb.app.suite.config import is_suite_file
from evalnb.app.suite.estimate import estimate_suite
from evalnb.records.stores import write_json
from evalnb.execution.batch import price_note
from evalnb.pipeline.accounting import estimate, minimum_run_minutes
from evalnb.core.errors import ConfigError
from evalnb.evidence.items import calls_text
from evalnb.evidence.items_html import show
from evalnb.evidence.failures import item_calls
from evalnb.pipeline.preflight import check_paths
from evalnb.pipeline.run import check_keys, load_config, make_benchmark
from evalnb.pipeline.probe import caps_entry, probe_record, probe_window


def estimate_command(params: Path, sets: Sequence[str], wide: bool = False) -> int:
    """What a run (or a suite: its contestants' estimates summed) will call and spend, making
    no call and writing nothing. The benchmark's warnings come first, as ``run`` says them."""
    if is_suite_file(params):
        return estimate_suite(params, sets)

    config, bench_class = load_config(params, sets)
    check_paths(config, str(params))   # the same words as run's for a missing data file or corpus
    bench = make_benchmark(config, bench_class)
    output.warnings(bench.warnings)
    rows = estimate(config, bench, bench.tasks, config.output_dir)
    print(estimate_table(rows, wide))
    shortest = minimum_run_minutes(rows)
    if shortest is not None:
        _note(wide, f"Shortest time under the configured rate limits: {shortest:g} minutes (stages in turn, "
              "endpoints of a stage side by side; output counted at its budgets).")
    _note(wide, "ESTIMATE, no call made: input tokens are characters / 3.3 (English) or / 1.5 (CJK); "
          "output tokens and judge calls for answers not yet generated are upper bounds "
          "(every in-scope task answered, every budget used).")
    if awaiting := sum(r.get("awaiting_answers", 0) for r in rows):
        _note(wide, f"{awaiting} call(s) need other calls' answers first (a later turn of a conversation): counted "
              "from the benchmark's declaration, their prompts estimated on assumed answers; the run makes them "
              "once those answers are recorded.")
    if not wide:
        _note(wide, "cost (max): input at its estimate and every output budget used, at the live price; "
              "--wide for every column (batch prices, rate-limit minutes, measured latency).")
    if config.judge_retest:
        _note(wide, "judge_retest: the retest study's calls (sample x repeats per judge call of a sampled answer), made "
              "once the protocol is complete; before the run, drawn as if every in-scope answer were judged.")
    if wide and any(r["measured_calls"] for r in rows):
        _note(wide, "Measured: measured_median_s from this run's finished calls; est_minutes_measured at that median "
              "with the endpoint's concurrency; est_output_tokens_measured at their mean output.")
    if wide and config.prices:
        _note(wide, f"Costs: max_total_cost_usd at the live price, max_total_cost_batch_usd in batch mode ({price_note(config.prices)}); "
              "mode is how each endpoint is set to run.")
    return EXIT_OK


def _note(wide: bool, text: str) -> None:
    """A note under the estimate, wrapped to the table's 100 columns (``--wide``: unwrapped)."""
    print(text if wide else textwrap.fill(text, WIDTH))


def probe_command(params: Path, sets: Sequence[str], max_calls: int, max_tokens: int | None = None) -> int:
    """Probe the contestant's context window; print and store a caps entry."""

    config, _ = load_config(params, sets)
    check_keys(config)
    with live_progress():
        results = probe_window(config, max_calls=max_calls, max_tokens=max_tokens)
    for r in results:
        print(f"{r.kind}: {r.accepted_chars:,} characters accepted"
              + (f", {r.rejected_chars:,} rejected" if r.rejected_chars else " (the upper bound: probe higher)")
              + f" ({r.calls} calls, {r.max_tokens} output tokens each)")
        print(f"    text: {r.text_source}")
        print(f"    run's budget: {r.budget_check}; cap {r.cap:,} characters")
    target = config.output_dir / "window_probe.json"
    write_json(target, probe_record(config, results))
    print(f"add to the parameters:  model.caps: {json.dumps(caps_entry(results))}   (written to {target})")
    print("the caps are characters of this corpus's text: another corpus may run more or fewer characters a token")
    return EXIT_OK


def show_command(run_dir: Path, item_id: str) -> int:
    """One item's evidence (what its benchmark declares), read from the run's evidence.json,
    then its calls: each stored line's status, attempts and error (evalnb.evidence.failures)."""
    try:
        sys.stdout.write(str(show(run_dir, item_id)))
    except ConfigError:   # before the aggregate stage: its calls alone, if it has any
        if not (calls := item_calls(run_dir, item_id)):
            raise
        sys.stdout.write(f"{item_id}: no evidence yet (the aggregate stage has not run on its calls)\n"
                         + calls_text(calls))
    return EXIT_OK
