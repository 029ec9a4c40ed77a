"""Batch mode: a stage's calls to an endpoint sent through its provider's batch API.

``mode: batch`` on an ``openai``, ``anthropic`` or ``gemini`` endpoint (contestant or judge)
sends that endpoint's calls as provider batches instead of one request at a time: the same
request bodies (built by the live provider's own functions), about half the price, and a
turnaround of up to a day. A stage that has submitted its calls is resumable and waiting:
the next ``evalnb run`` collects what finished and writes each result into the stage's store
exactly as a live call's record would be, read by the live provider's own reply reader.

- :mod:`evalnb.execution.batch.journal`: the batch journal in the run directory (``batches.jsonl``).
- :mod:`evalnb.execution.batch.backends`: one class per provider over its official SDK
  (``openai_batches``, ``anthropic_batches``, ``gemini_batches``; what they share in ``backend_base``).
- :mod:`evalnb.execution.batch.engine`: a stage's passes: submission in chunks (``chunk``), waiting.
- :mod:`evalnb.execution.batch.collect`: a batch looked up, polled, and its results recorded.
- ``limits.json`` beside this file: each provider's per-batch limits with their sources, and the
  default batch price factor.

Endpoint parameters: ``mode: batch`` (default ``live``) and an optional ``batch:`` mapping:
``resend`` (``batch``, the default, or ``live``: how a call that failed transiently inside a
batch is sent again), ``max_requests`` and ``max_bytes`` (smaller chunks than the provider
allows), ``inline_max_bytes`` (Gemini: a batch larger than this goes as an uploaded file; 0
always uploads one).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from evalnb.core.errors import ConfigError

# `evalnb run --wait`: poll until every batch has finished, this many seconds apart.
WAIT_ENV = "EVALNB_BATCH_WAIT"
DEFAULT_POLL_INTERVAL = 60.0


@dataclass(frozen=True)
class Limits:
    max_requests: int
    max_bytes: int
    inline_bytes: int | None   # requests travel inside the create call up to this size (0 never, None always)
    source: str

    def capped(self, options: Mapping[str, Any] | None) -> Limits:
        """The provider's limits, lowered by the endpoint's ``batch.max_requests``, ``max_bytes``
        and ``inline_max_bytes`` (a provider that takes a file and inline requests)."""
        options = options or {}
        inline = self.inline_bytes
        if inline and options.get("inline_max_bytes") is not None:
            inline = min(inline, options["inline_max_bytes"])
        return Limits(min(self.max_requests, options.get("max_requests") or self.max_requests),
                      min(self.max_bytes, options.get("max_bytes") or self.max_bytes), inline, self.source)


@cache
def _table() -> dict[str, Any]:
    text = resources.files(__package__).joinpath("limits.json").read_text("utf-8")
    table: dict[str, Any] = json.loads(text)
    return table


def limits(provider: str) -> Limits:
    """Per-batch limits of ``provider`` (byte limits already reduced by its margin)."""
    row = _table()[provider]
    margin = row.get("margin", 1.0)
    inline = row.get("inline_max_bytes")
    return Limits(int(row["max_requests"]), int(row["max_bytes"] * margin),
                  None if inline is None else int(inline * margin), row["source"])


def price_factor() -> float:
    """Batch price as a share of the live price, where the price table gives no batch price."""
    return float(_table()["price_factor"]["value"])


def batch_price(prices: Mapping[str, Mapping[str, float]], model: str) -> dict[str, float] | None:
    """Dollars per million tokens in batch mode: ``batch_input``/``batch_output`` from the
    price table, else the live price times :func:`price_factor` (half)."""
    price = prices.get(model)
    if price is None:
        return None
    factor = price_factor()
    return {"input": price.get("batch_input", price["input"] * factor),
            "output": price.get("batch_output", price["output"] * factor)}


def price_note(prices: Mapping[str, Mapping[str, float]]) -> str:
    """How batch prices were set, for every output that shows a batch cost."""
    given = sorted(m for m, p in prices.items() if "batch_input" in p or "batch_output" in p)
    default = f"{price_factor():.0%} of the live price (the providers' batch discount)"
    return f"batch prices: {default}" + (f"; as given in the price table for {', '.join(given)}" if given else "")


def wait_interval() -> float | None:
    """Seconds between polls when ``evalnb run --wait`` asked to wait; None: poll once."""
    value = os.environ.get(WAIT_ENV, "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        raise ConfigError(f"{WAIT_ENV}={value!r}: expected a number of seconds") from None
