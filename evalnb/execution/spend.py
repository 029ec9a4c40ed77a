"""What a run has spent, read from its records at the configured prices (US dollars).

Every stored record's reported usage counts (at the batch price for a call answered inside a
provider batch), and so do its failed attempts' ``failed_attempt_usage``, over every line of
the stage stores: retries and earlier invocations are all counted, and a resume, a kill or a
second process cannot forget them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalnb.execution.batch import batch_price
from evalnb.records.stores import read_lines

STORES = ("generate.jsonl", "judge.jsonl", "judge_retest.jsonl")   # the last: evalnb.judges.retest


def usd(input_tokens: float, output_tokens: float, price: Mapping[str, float] | None) -> float:
    """Dollars for tokens at a price per million (no price: nothing)."""
    if price is None:
        return 0.0
    return (input_tokens * price["input"] + output_tokens * price["output"]) / 1e6


def endpoint_models(config: Mapping[str, Any]) -> dict[str, str]:
    """Role in the records -> model name, from a resolved configuration (config.json's shape)."""
    return {"model": config["model"]["name"],
            **{f"judge{i}": j["name"] for i, j in enumerate(config.get("judges") or [], start=1)}}


def record_cost(record: Mapping[str, Any], models: Mapping[str, str], prices: Mapping[str, Any]) -> float:
    """What one stored line says its attempts cost (see the module docstring)."""
    if not record.get("attempts"):
        return 0.0   # decided without a call
    model = models.get(str(record.get("endpoint")), str(record.get("endpoint")))
    live = prices.get(model)
    usage = record.get("usage") or {}
    price = batch_price(prices, model) if record.get("batch") else live
    total = usd(usage.get("input_tokens", 0), usage.get("output_tokens", 0), price)
    for attempt in record.get("failed_attempt_usage") or ():
        total += usd(attempt.get("input_tokens", 0), attempt.get("output_tokens", 0), live)
    return total


def run_spend(run_dir: Path, config: Mapping[str, Any] | None = None) -> float:
    """Every line of the run's stage stores, at the run's prices (config.json's unless given)."""
    if config is None:
        try:
            config = json.loads((run_dir / "config.json").read_text("utf-8"))
        except (OSError, ValueError):
            return 0.0
    assert config is not None
    models, prices = endpoint_models(config), config.get("prices") or {}
    return sum(record_cost(record, models, prices) for name in STORES for record in read_lines(run_dir / name))
