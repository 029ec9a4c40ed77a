"""Claude models through the official ``anthropic`` SDK's messages endpoint."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import anthropic

from evalnb.providers.base import (ChatRequest, ProviderError, Completion, Usage, malformed_reply,
                                   rate_limit_headers, reply_shape, sdk_client_options, status_of,
                                   unreadable_reply)
from evalnb.providers.streams.anthropic import read_stream
from evalnb.providers.openai_compat import sdk_error
from evalnb.providers.streams.base import DEFAULT_SETTINGS, StreamSettings, since


def completion_of(message: Any, *, request_id: str | None, headers: Mapping[str, str] | None = None
                  ) -> Completion:
    """A message read as evalnb reads it, whether from a live call or a batch's results: the
    one place for status mapping, refusal, empty, usage and route."""
    if not isinstance(message, anthropic.types.Message) or not isinstance(message.content, list):
        # A gateway's HTML page arrives as a str; a message without content carries no answer.
        raise malformed_reply(reply_shape(message), "no content list")
    text = "".join(block.text for block in message.content if block.type == "text")
    thinking = "".join(block.thinking for block in message.content if block.type == "thinking")
    return Completion(
        text=text,
        status="refused" if message.stop_reason == "refusal" else status_of(text),
        finish_reason=message.stop_reason,
        usage=Usage(message.usage.input_tokens or 0, message.usage.output_tokens or 0),
        model_route=message.model,
        request_id=request_id,
        raw={"rate_limit_headers": dict(headers)} if headers else {},
        reasoning=thinking or None,
    )


def batch_params(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The request body ``messages.create(**kwargs)`` sends, as a batch request's ``params``:
    the client-side ``timeout`` dropped, ``extra_body`` merged in as the SDK merges it."""
    params = {k: v for k, v in kwargs.items() if k not in ("timeout", "extra_body")}
    return params | dict(kwargs.get("extra_body") or {})


class AnthropicProvider:
    def __init__(self, model: str, *, base_url: str | None, api_key_env: str | None,
                 concurrency: int, timeout: float, role: str = "model", observe_quota: bool = False,
                 stream: StreamSettings = DEFAULT_SETTINGS) -> None:
        self.model, self.concurrency, self.timeout, self.stream = model, concurrency, timeout, stream
        self.observe_quota = observe_quota   # read the reply's rate-limit headers (paced endpoints)
        self._client = anthropic.AsyncAnthropic(**sdk_client_options(
            anthropic.DefaultAioHttpClient, base_url=base_url, api_key_env=api_key_env, role=role, timeout=timeout))

    def request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model, "max_tokens": request.max_tokens,
            "messages": [{"role": turn.role, "content": turn.content} for turn in request.turns()],
            # An explicit timeout: without one the SDK refuses non-streaming calls whose
            # max_tokens (32768 for reasoning models) it guesses could exceed ten minutes.
            "timeout": self.timeout,
        }
        if request.system is not None:
            kwargs["system"] = request.system
        if request.json_schema is not None:
            kwargs["output_config"] = {"format": {"type": "json_schema", "schema": request.json_schema}}
        if request.temperature is not None:
            # SDK 2.x has no temperature argument; the API still accepts the field.
            kwargs["extra_body"] = {"temperature": request.temperature}
        return kwargs

    async def complete(self, request: ChatRequest) -> Completion:
        if self.stream.streams(request):   # streaming is transport: the same request, streamed
            reply = await read_stream(self._client, self.request_kwargs(request), self.stream, sdk_error)
            completion = completion_of(reply.response, request_id=reply.headers.get("request-id"),
                                       headers=rate_limit_headers(reply.headers) if self.observe_quota else {})
            return self.stream.finish(completion, reply.latency, streamed=True)
        started = time.monotonic()
        try:
            # The raw response (no extra cost: the SDK builds it either way) keeps the body, for
            # the record of a reply of the wrong shape, and the quota headers of paced endpoints.
            raw = await self._client.messages.with_raw_response.create(**self.request_kwargs(request))
            headers = rate_limit_headers(raw.headers) if self.observe_quota else {}
            message = await raw.parse()   # the async SDK's raw response reads asynchronously
        except anthropic.APIError as error:
            raise sdk_error(error) from None
        except ValueError as error:   # JSONDecodeError: a body cut off, or not JSON at all
            raise unreadable_reply(error) from None
        try:
            return self.stream.finish(completion_of(message, request_id=getattr(message, "_request_id", None)
                                                    or raw.headers.get("request-id"), headers=headers),
                                      since(started))
        except ProviderError as error:   # the record shows the body as it came, not as parsed
            if error.code != "malformed_reply":
                raise
            raise malformed_reply(await raw.text(), "no content list") from None

    async def aclose(self) -> None:
        await self._client.close()
