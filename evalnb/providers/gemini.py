"""Gemini models through the official ``google-genai`` SDK."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2
from google import genai
from google.genai import errors, types

from evalnb.providers.base import (ChatRequest, Completion, ProviderError, Usage, api_key,
                                   http_error, malformed_reply, reply_shape, retry_after_seconds,
                                   status_of, transport_error, unreadable_reply)
from evalnb.providers.streams.gemini import read_stream
from evalnb.providers.streams.base import DEFAULT_SETTINGS, StreamSettings, since

# google-genai's async path runs on httpx2, or on aiohttp when that is installed; neither
# family of transport errors is wrapped by the SDK.
TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (httpx2.TransportError, asyncio.TimeoutError, OSError)
try:
    import aiohttp
    TRANSPORT_ERRORS += (aiohttp.ClientError,)
except ImportError:  # pragma: no cover - depends on the environment
    pass

BLOCKED = frozenset({"SAFETY", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "RECITATION"})


def usage_of(usage: types.GenerateContentResponseUsageMetadata | None) -> Usage | None:
    """Gemini reports thinking apart (``thoughtsTokenCount``) but bills it as output."""
    if usage is None:
        return None
    thoughts = usage.thoughts_token_count
    return Usage(usage.prompt_token_count or 0, (usage.candidates_token_count or 0) + (thoughts or 0),
                 thoughts)


def completion_of(response: Any) -> Completion:
    """A response read as evalnb reads it, whether from a live call or a batch's results: the
    one place for status mapping, refusal (a blocked prompt too), empty, usage and route."""
    if not isinstance(response, types.GenerateContentResponse) or not (
            response.candidates or (response.prompt_feedback and response.prompt_feedback.block_reason)):
        # Neither an answer nor a blocked prompt: nothing in it carries an answer.
        raise malformed_reply(reply_shape(response), "no candidates and no block reason")
    candidate = response.candidates[0] if response.candidates else None
    finish = candidate.finish_reason.value if candidate and candidate.finish_reason else None
    parts = candidate.content.parts if candidate and candidate.content and candidate.content.parts else []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    thoughts = "".join(p.text for p in parts if p.text and p.thought)
    blocked = (finish in BLOCKED and not text) or (
        candidate is None and response.prompt_feedback is not None
        and response.prompt_feedback.block_reason is not None)
    return Completion(
        text=text,
        status="refused" if blocked else status_of(text),
        finish_reason=finish,
        usage=usage_of(response.usage_metadata),
        model_route=response.model_version,
        request_id=response.response_id,
        reasoning=thoughts or None,
    )


def api_error(error: errors.APIError) -> ProviderError:
    headers = getattr(error.response, "headers", None)
    return http_error(error.code, error.message or str(error), code=error.status,
                      retry_after=retry_after_seconds(headers, error.details), details=error.details)


class GeminiProvider:
    def __init__(self, model: str, *, base_url: str | None, api_key_env: str | None,
                 concurrency: int, timeout: float, api_version: str | None = None,
                 role: str = "model", stream: StreamSettings = DEFAULT_SETTINGS) -> None:
        self.model, self.concurrency, self.stream = model, concurrency, stream
        # retry_options of one attempt: the SDK's own retries off, including the implicit one
        # after a refused connection (a sleep of 1-10 s, then once more), so that evalnb's
        # policy counts every attempt and a refused connection is said at once.
        options = types.HttpOptions(base_url=base_url, api_version=api_version or "v1beta",
                                    timeout=int(timeout * 1000),   # milliseconds; none by default
                                    retry_options=types.HttpRetryOptions(attempts=1))
        # Held for the whole run: a Client closes its HTTP client when garbage-collected,
        # which would break the `.aio` view taken from it.
        self._client = genai.Client(api_key=api_key(api_key_env, role), http_options=options)

    def generation_config(self, request: ChatRequest) -> types.GenerateContentConfig:
        config: dict[str, Any] = {"max_output_tokens": request.max_tokens}
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if request.system is not None:
            config["system_instruction"] = request.system
        if request.json_schema is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = request.json_schema
        return types.GenerateContentConfig(**config)

    def contents(self, request: ChatRequest) -> list[types.Content]:
        """The conversation as Gemini's contents: the model's own turns have the role ``model``."""
        return [types.Content(role="model" if turn.role == "assistant" else "user", parts=[types.Part(text=turn.content)])
                for turn in request.turns()]

    async def complete(self, request: ChatRequest) -> Completion:
        if self.stream.streams(request):   # streaming is transport: the same request, streamed
            reply = await read_stream(self._client, self.model, self.contents(request),
                                      self.generation_config(request), self.stream, api_error)
            return self.stream.finish(completion_of(reply.response), reply.latency, streamed=True)
        started = time.monotonic()
        try:
            response = await self._client.aio.models.generate_content(
                model=self.model,
                contents=self.contents(request), config=self.generation_config(request))
        except errors.APIError as error:
            raise api_error(error) from None
        except TRANSPORT_ERRORS as error:
            raise transport_error(error) from None
        except ValueError as error:   # JSONDecodeError: a body cut off, not JSON, or an HTML page
            raise unreadable_reply(error) from None
        return self.stream.finish(completion_of(response), since(started))

    async def aclose(self) -> None:
        await self._client.aio.aclose()
