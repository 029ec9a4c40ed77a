"""Anthropic's batch API: ``client.messages.batches``, requests inline, built by
``AnthropicProvider.request_kwargs`` and read by the live reply reader."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalnb.execution.batch.backend_base import CLOCK_SKEW, Outcome, Poll, PollState, epoch, iso, lost
from evalnb.providers.base import ERROR_TYPE_STATUS, ChatRequest, ProviderError, http_error


class AnthropicBatches:
    """``client.messages.batches``: requests inline, results as JSONL from ``results_url``.

    A message batch carries no metadata, so an intent is looked up by time and size: the
    oldest batch created after the intent (less a clock skew) with exactly as many requests,
    not held by another journal entry. Its results are checked when collected: their custom
    ids carry the tag, and a batch whose results do not is not ours (abandoned, calls resent).
    """

    provider = "anthropic"

    def __init__(self, live: Any) -> None:
        self.live, self.client = live, live._client

    def line(self, custom_id: str, request: ChatRequest) -> dict[str, Any]:
        from evalnb.providers.anthropic_messages import batch_params
        return {"custom_id": custom_id, "params": batch_params(self.live.request_kwargs(request))}

    def line_bytes(self, line: Any) -> bytes:
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b","

    async def submit(self, tag: str, lines: Sequence[Any] | None, spool: Path | None) -> tuple[str, dict[str, Any]]:
        assert lines is not None
        batch = await self.client.messages.batches.create(requests=list(lines))
        return batch.id, {}

    async def find(self, tag: str, since: float, count: int, claimed: set[str]) -> str | None:
        found = None
        async for batch in self.client.messages.batches.list(limit=100):   # newest first
            created = epoch(batch.created_at)
            if created < since - CLOCK_SKEW:
                break
            c = batch.request_counts
            total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
            if batch.id not in claimed and total == count:
                found = str(batch.id)   # keep going: the oldest candidate wins
        return found

    async def poll(self, batch_id: str) -> Poll:
        batch = await self.client.messages.batches.retrieve(batch_id)
        state: PollState = "ended" if batch.processing_status == "ended" else "running"
        return Poll(state, batch.processing_status, batch.request_counts.model_dump(), iso(batch.ended_at), None,
                    batch)

    async def results(self, poll: Poll, order: Sequence[str]) -> list[tuple[str, Outcome]]:
        from evalnb.providers.anthropic_messages import completion_of

        out: list[tuple[str, Outcome]] = []
        async for item in await self.client.messages.batches.results(poll.raw.id):
            result = item.result
            outcome: Outcome
            if result.type == "succeeded":
                try:
                    outcome = completion_of(result.message, request_id=None)
                except ProviderError as failure:
                    outcome = failure
            elif result.type == "errored":
                error = result.error.error
                outcome = http_error(ERROR_TYPE_STATUS.get(error.type, 500), error.message)
            else:   # expired, canceled
                outcome = lost(result.type)
            out.append((item.custom_id, outcome))
        return out
