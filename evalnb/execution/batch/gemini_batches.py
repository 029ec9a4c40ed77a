"""Gemini's batch API: ``client.batches``, requests built from ``GeminiProvider.contents`` and
``generation_config``, inline or in an uploaded file, read by the live reply reader."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalnb.execution.batch.backend_base import Outcome, Poll, PollState, iso
from evalnb.providers.base import ChatRequest, ProviderError, http_error

# google.rpc.Code -> HTTP status (the mapping of google.rpc.code.proto), for Gemini's per-request errors.
GRPC_STATUS = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400,
               12: 501, 13: 500, 14: 503, 15: 500, 16: 401}
# ... and its name, which a live Gemini error carries as its status (the record's error code).
GRPC_NAME = {1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
             6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
             10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
             15: "DATA_LOSS", 16: "UNAUTHENTICATED"}


class GeminiBatches:
    """``client.batches``: inline requests while the batch is small, else a JSONL file uploaded
    with ``client.files`` (``{"key", "request"}`` per line) whose results come back as a file
    (``{"key", "response"}`` or ``{"key", "error"}`` per line). Inline requests carry their
    custom id in ``metadata.key``. The file line is the very request the SDK sends inline (its
    own converter), so both inputs carry the live ``generateContent`` body."""

    provider = "gemini"
    TERMINAL_OK = ("JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED", "JOB_STATE_EXPIRED",
                   "JOB_STATE_CANCELLED")

    def __init__(self, live: Any) -> None:
        self.live, self.client = live, live._client

    def line(self, custom_id: str, request: ChatRequest) -> Any:
        from google.genai import types
        return types.InlinedRequest(contents=self.live.contents(request), config=self.live.generation_config(request),
                                    metadata={"key": custom_id})

    def line_bytes(self, line: Any) -> bytes:
        from google.genai import _common
        from google.genai.batches import _InlinedRequest_to_mldev

        wire = _InlinedRequest_to_mldev(self.client._api_client, line)   # what the SDK sends inline
        wire = _common.encode_unserializable_types(_common.convert_to_dict(wire))
        entry = {"key": line.metadata["key"], "request": wire["request"]}
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"

    async def submit(self, tag: str, lines: Sequence[Any] | None, spool: Path | None) -> tuple[str, dict[str, Any]]:
        extra: dict[str, Any] = {}
        if lines is not None:
            src: Any = list(lines)
        else:
            assert spool is not None
            upload = await self.client.aio.files.upload(
                file=str(spool), config={"display_name": tag, "mime_type": "application/jsonl"})
            src, extra = upload.name, {"input_file": upload.name}
        job = await self.client.aio.batches.create(model=self.live.model, src=src, config={"display_name": tag})
        return str(job.name), extra

    async def find(self, tag: str, since: float, count: int, claimed: set[str]) -> str | None:
        async for job in await self.client.aio.batches.list(config={"page_size": 100}):
            if job.display_name == tag:
                return str(job.name)
        return None

    async def poll(self, batch_id: str) -> Poll:
        job = await self.client.aio.batches.get(name=batch_id)
        name = job.state.value if job.state is not None else "JOB_STATE_UNSPECIFIED"
        state: PollState = ("ended" if name in self.TERMINAL_OK else "failed" if name == "JOB_STATE_FAILED"
                            else "running")
        error = job.error.message if job.error is not None else None
        return Poll(state, name, {}, iso(job.end_time), error, job)

    async def results(self, poll: Poll, order: Sequence[str]) -> list[tuple[str, Outcome]]:
        dest = poll.raw.dest
        if dest is not None and dest.file_name:
            data = await self.client.aio.files.download(file=dest.file_name)
            return [self.read_file_line(json.loads(line)) for line in data.decode("utf-8").splitlines()
                    if line.strip()]
        responses = (dest.inlined_responses if dest is not None else None) or []
        out: list[tuple[str, Outcome]] = []
        for position, item in enumerate(responses):
            # Matched by the key each request carried; by position where a response lost it.
            custom_id = (item.metadata or {}).get("key") or (order[position] if position < len(order) else "")
            out.append((custom_id, self.outcome(item.response, item.error)))
        return out

    def read_file_line(self, line: Mapping[str, Any]) -> tuple[str, Outcome]:
        """One line of a results file: the REST response read as the SDK reads a live one."""
        from google.genai import types
        from google.genai.batches import _GenerateContentResponse_from_mldev

        error = line.get("error") or line.get("status")
        if error is not None:
            return str(line.get("key")), self.outcome(None, types.JobError(**{k: error.get(k) for k in
                                                                            ("code", "message")}))
        body = line.get("response")
        response = (types.GenerateContentResponse._from_response(
            response=_GenerateContentResponse_from_mldev(body), kwargs={}) if isinstance(body, Mapping) else body)
        return str(line.get("key")), self.outcome(response, None)

    @staticmethod
    def outcome(response: Any, error: Any) -> Outcome:
        from evalnb.providers.gemini import completion_of

        if error is not None:
            code = error.code or 2
            return http_error(GRPC_STATUS.get(code, 500), error.message or "error", code=GRPC_NAME.get(code))
        try:
            return completion_of(response)
        except ProviderError as failure:
            return failure
