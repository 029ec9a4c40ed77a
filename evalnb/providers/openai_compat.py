"""OpenAI and every OpenAI-compatible server (vLLM, llama.cpp, most hosted open models),
through the official ``openai`` SDK's chat-completions endpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import openai

from evalnb.providers.base import (ChatRequest, Completion, ProviderError, Usage,
                                   http_error, malformed_reply, rate_limit_headers, reply_shape,
                                   retry_after_seconds, sdk_client_options,
                                   status_of, transport_error, unreadable_reply)
from evalnb.providers.streams.openai import EMPTY_STREAM, read_stream, reasoning_of
from evalnb.providers.streams.base import DEFAULT_SETTINGS, StreamSettings, since


def sdk_error(error: Exception) -> ProviderError:
    """Classify an exception from a Stainless-generated SDK (openai and anthropic share the shape)."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        body = getattr(error, "body", None)
        detail = body.get("error", body) if isinstance(body, dict) else None
        message = (detail.get("message") if isinstance(detail, dict) else None) or _with_body(error)
        code = getattr(error, "code", None) or (detail.get("code") if isinstance(detail, dict) else None)
        response = getattr(error, "response", None)
        error_type = detail.get("type") if isinstance(detail, dict) else None
        return http_error(status, str(message), code=str(code) if code else None,
                          retry_after=retry_after_seconds(getattr(response, "headers", None), body),
                          error_type=str(error_type) if error_type else None)
    # Timeouts and connection failures carry no status: always worth another attempt.
    return transport_error(error)


def _with_body(error: Exception) -> str:
    """An error whose body is no JSON error (a gateway's HTML page): the SDK's words and the
    start of the page, whitespace collapsed, so a reader sees whose 404 it was."""
    try:
        text = " ".join(str(getattr(getattr(error, "response", None), "text", "") or "").split())
    except Exception:   # noqa: BLE001 - a body that cannot be read: the SDK's words alone
        text = ""
    return f"{error} - {text[:200]}" if text and text not in str(error) else str(error)


def usage_of(usage: Any) -> Usage | None:
    """completion_tokens already counts reasoning tokens (billed as output); their share is
    in completion_tokens_details."""
    if usage is None:
        return None
    details = getattr(usage, "completion_tokens_details", None)
    reasoning = getattr(details, "reasoning_tokens", None) if details is not None else None
    return Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0, reasoning)


def server_timings(response: Any) -> dict[str, Any]:
    """llama.cpp's ``timings`` (milliseconds spent on the prompt and on generating), which its
    server adds beside the usage; kept as ``server_timings``, read into the latency by
    :meth:`StreamSettings.finish`."""
    timings = (getattr(response, "model_extra", None) or {}).get("timings")
    return {"server_timings": timings} if isinstance(timings, dict) else {}


def completion_of(response: Any, *, request_id: str | None, headers: Mapping[str, str] | None = None,
                  body: Callable[[], str] | None = None) -> Completion:
    """A chat completion read as evalnb reads it, whether it came from a live call or from a
    batch's output file: the one place for status mapping, refusal, empty, usage and route."""
    if not isinstance(response, openai.types.chat.ChatCompletion) or not response.choices \
            or response.choices[0].message is None:
        # A gateway's HTML page arrives as a str; a body without choices carries no answer.
        raise malformed_reply(body() if body else reply_shape(response), "no choices[0].message")
    choice = response.choices[0]
    message = choice.message
    text = message.content or ""
    refused = bool(message.refusal) or choice.finish_reason == "content_filter"
    return Completion(
        text=text,
        status="refused" if refused else status_of(text),
        finish_reason=choice.finish_reason,
        usage=usage_of(response.usage),
        model_route=response.model,
        request_id=request_id,
        raw={"system_fingerprint": response.system_fingerprint,
             **server_timings(response),
             **({"refusal": message.refusal} if message.refusal else {}),
             **({"rate_limit_headers": dict(headers)} if headers else {})},
        reasoning=reasoning_of(message),
    )


class OpenAIProvider:
    def __init__(self, model: str, *, base_url: str | None, api_key_env: str | None,
                 concurrency: int, timeout: float, token_param: str = "max_tokens",
                 role: str = "model", observe_quota: bool = False, stream: StreamSettings = DEFAULT_SETTINGS) -> None:
        self.model, self.concurrency, self.token_param, self.stream = model, concurrency, token_param, stream
        self.observe_quota = observe_quota   # read the reply's rate-limit headers (paced endpoints)
        self._client = openai.AsyncOpenAI(**sdk_client_options(
            openai.DefaultAioHttpClient, base_url=base_url, api_key_env=api_key_env, role=role, timeout=timeout))

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        messages: list[dict[str, str]] = []
        if request.system is not None:
            messages.append({"role": "system", "content": request.system})
        messages += [{"role": turn.role, "content": turn.content} for turn in request.turns()]
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                self.token_param: request.max_tokens}
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.json_schema is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "judgement", "schema": request.json_schema, "strict": True}}
        return body

    async def complete(self, request: ChatRequest) -> Completion:
        if self.stream.streams(request):   # streaming is transport: the same body, streamed
            try:
                reply = await read_stream(self._client, self.request_body(request), self.stream, sdk_error)
            except ProviderError as failure:
                # A stream that said nothing at all: the same request once without streaming, so
                # the endpoint's own reply (an answer, or its error: llama.cpp's context overflow
                # is a 400 then) is this attempt's outcome, not "stream ended" retried for ever.
                if failure.code != EMPTY_STREAM:
                    raise
            else:
                completion = completion_of(reply.response, request_id=reply.headers.get("x-request-id"),
                                           headers=rate_limit_headers(reply.headers) if self.observe_quota else {})
                return self.stream.finish(completion, reply.latency, streamed=True)
        started = time.monotonic()
        try:
            # The raw response (no extra cost: the SDK builds it either way) keeps the body, for
            # the record of a reply of the wrong shape, and the quota headers of paced endpoints.
            raw = await self._client.chat.completions.with_raw_response.create(**self.request_body(request))
            headers = rate_limit_headers(raw.headers) if self.observe_quota else {}
            response = raw.parse()
        except openai.APIError as error:
            raise sdk_error(error) from None
        except ValueError as error:   # JSONDecodeError: a body cut off, or not JSON at all
            raise unreadable_reply(error) from None
        return self.stream.finish(completion_of(response, request_id=getattr(response, "_request_id", None),
                                                headers=headers, body=lambda: raw.text), since(started))

    async def aclose(self) -> None:
        await self._client.close()
