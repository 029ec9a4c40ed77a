"""OpenAI's batch API: ``client.files`` (a JSONL input file, ``purpose="batch"``) and
``client.batches``; each request built by ``OpenAIProvider.request_body`` and each result read
by the live reply reader."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalnb.execution.batch.backend_base import CLOCK_SKEW, Outcome, Poll, PollState, iso, lost
from evalnb.providers.base import ChatRequest, ProviderError, http_error


class OpenAIBatches:
    """``client.files`` (a JSONL input file, ``purpose="batch"``) and ``client.batches``."""

    provider = "openai"
    endpoint = "/v1/chat/completions"

    def __init__(self, live: Any) -> None:
        self.live, self.client = live, live._client

    def line(self, custom_id: str, request: ChatRequest) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": self.endpoint, "body": self.live.request_body(request)}

    def line_bytes(self, line: Any) -> bytes:
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"

    async def submit(self, tag: str, lines: Sequence[Any] | None, spool: Path | None) -> tuple[str, dict[str, Any]]:
        assert spool is not None
        upload = await self.client.files.create(file=(f"{tag}.jsonl", spool.read_bytes(), "application/jsonl"),
                                                purpose="batch")
        batch = await self.client.batches.create(input_file_id=upload.id, endpoint=self.endpoint,
                                                 completion_window="24h", metadata={"evalnb_tag": tag})
        return batch.id, {"input_file_id": upload.id}

    async def find(self, tag: str, since: float, count: int, claimed: set[str]) -> str | None:
        async for batch in self.client.batches.list(limit=100):   # newest first
            if batch.created_at < since - CLOCK_SKEW:
                return None
            if (batch.metadata or {}).get("evalnb_tag") == tag:
                return str(batch.id)
        return None

    async def poll(self, batch_id: str) -> Poll:
        batch = await self.client.batches.retrieve(batch_id)
        status = batch.status
        state: PollState = ("running" if status in ("validating", "in_progress", "finalizing", "cancelling")
                            else "failed" if status == "failed" else "ended")
        errors = batch.errors.data if batch.errors and batch.errors.data else []
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        finished = batch.completed_at or batch.failed_at or batch.expired_at or batch.cancelled_at
        return Poll(state, status, counts, iso(finished),
                    "; ".join(f"{e.code}: {e.message}" for e in errors) or None, batch)

    async def results(self, poll: Poll, order: Sequence[str]) -> list[tuple[str, Outcome]]:
        out: list[tuple[str, Outcome]] = []
        for file_id in (poll.raw.output_file_id, poll.raw.error_file_id):
            if not file_id:
                continue
            content = await self.client.files.content(file_id)
            for raw_line in content.text.splitlines():
                if raw_line.strip():
                    out.append(self.read_line(json.loads(raw_line)))
        return out

    @staticmethod
    def read_line(line: Mapping[str, Any]) -> tuple[str, Outcome]:
        """One line of an output or error file, read as the live call's reply would be."""
        from openai._models import construct_type
        from openai.types.chat import ChatCompletion

        from evalnb.providers.openai_compat import completion_of

        custom_id = str(line.get("custom_id"))
        response, error = line.get("response"), line.get("error")
        if isinstance(response, Mapping) and response.get("status_code") == 200:
            body = response.get("body")
            try:   # the same construction the SDK applies to a live reply's JSON
                parsed = construct_type(type_=ChatCompletion, value=body)
                return custom_id, completion_of(parsed, request_id=response.get("request_id"))
            except ProviderError as failure:
                return custom_id, failure
        if isinstance(response, Mapping) and isinstance(response.get("status_code"), int):
            body = response.get("body")
            detail = body.get("error", body) if isinstance(body, Mapping) else None
            message = (detail.get("message") if isinstance(detail, Mapping) else None) or json.dumps(body)
            code = detail.get("code") if isinstance(detail, Mapping) else None
            return custom_id, http_error(response["status_code"], str(message), code=str(code) if code else None)
        code = str((error or {}).get("code") or "missing")
        return custom_id, lost(code.removeprefix("batch_"), str((error or {}).get("message") or ""))
