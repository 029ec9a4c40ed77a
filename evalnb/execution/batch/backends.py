"""One class per provider's batch API, over the official SDK client of the live provider.

Each backend builds a batched request from the live provider's own request builder
(``OpenAIProvider.request_body``, ``AnthropicProvider.request_kwargs``,
``GeminiProvider.contents`` + ``generation_config``) and reads each result with the live
provider's own reply reader (``completion_of``), so a batched call sends and records exactly
what a live call would. A failure inside a batch becomes the same classified
:class:`ProviderError` a live call would raise: an HTTP status is classified by
:func:`evalnb.providers.base.http_error`; an expired, cancelled or missing request is
transient.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Protocol

from evalnb.providers.base import ERROR_TYPE_STATUS, Completion, ChatRequest, ProviderError, http_error, transport_error

PollState = Literal["running", "ended", "failed"]
Outcome = Completion | ProviderError
# How far the local clock and the provider's may disagree when looking a batch up by time.
CLOCK_SKEW = 600.0

# google.rpc.Code -> HTTP status (the mapping of google.rpc.code.proto), for Gemini's per-request errors.
GRPC_STATUS = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409, 11: 400,
               12: 501, 13: 500, 14: 503, 15: 500, 16: 401}
# ... and its name, which a live Gemini error carries as its status (the record's error code).
GRPC_NAME = {1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
             6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
             10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
             15: "DATA_LOSS", 16: "UNAUTHENTICATED"}


@dataclass
class Poll:
    """A batch as the provider last described it."""

    state: PollState                  # running; ended (results to collect); failed as a whole
    provider_state: str               # the provider's own word for it
    counts: dict[str, int] = field(default_factory=dict)
    finished_at: str | None = None
    error: str | None = None
    raw: Any = None                   # the SDK's batch object, handed back to results()


class Backend(Protocol):
    provider: str

    def line(self, custom_id: str, request: ChatRequest) -> Any: ...

    def line_bytes(self, line: Any) -> bytes:
        """The request as it counts against the batch's byte limit (as a file line, where the
        provider takes a file)."""

    async def submit(self, tag: str, lines: Sequence[Any] | None, spool: Path | None) -> tuple[str, dict[str, Any]]:
        """Create the batch from ``lines`` (inline) or, when None, the file ``spool``."""

    async def find(self, tag: str, since: float, count: int, claimed: set[str]) -> str | None: ...

    async def poll(self, batch_id: str) -> Poll: ...

    async def results(self, poll: Poll, order: Sequence[str]) -> list[tuple[str, Outcome]]: ...


def iso(value: Any) -> str | None:
    """A provider's timestamp (epoch seconds or datetime) as ISO 8601 UTC."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value, timezone.utc)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).isoformat(timespec="seconds")
    return str(value)


def epoch(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def lost(kind: str, detail: str = "") -> ProviderError:
    """A request the batch did not answer (expired, cancelled, missing): resumable."""
    return ProviderError("transient", f"batch request {kind}" + (f": {detail}" if detail else ""),
                         code=f"batch_{kind}")


def management_error(error: Exception) -> ProviderError:
    """A failed call to a batch API itself (create, retrieve, list), classified like a live one."""
    if isinstance(error, ProviderError):
        return error
    from evalnb.providers.openai_compat import sdk_error
    import anthropic
    import openai
    if isinstance(error, (openai.APIError, anthropic.APIError)):
        return sdk_error(error)
    from google.genai import errors
    if isinstance(error, errors.APIError):
        from evalnb.providers.gemini import api_error   # the live reading: endpoint causes, retry hints
        return api_error(error)
    return transport_error(error)   # a refused connection says so, and was not billed


# --- OpenAI --------------------------------------------------------------------------------------

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


# --- Anthropic -----------------------------------------------------------------------------------

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


# --- Gemini --------------------------------------------------------------------------------------

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


def backend_for(provider: str, live: Any) -> Backend:
    """The batch API of ``provider``, over the live provider ``live`` (its client and builders)."""
    if provider == "openai":
        return OpenAIBatches(live)
    if provider == "anthropic":
        return AnthropicBatches(live)
    if provider == "gemini":
        return GeminiBatches(live)
    raise ValueError(f"no batch API for provider {provider!r}")
