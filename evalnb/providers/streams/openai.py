"""A streamed chat completion (``stream: true`` with ``stream_options.include_usage``),
assembled into the ``ChatCompletion`` the non-streamed call returns and read by the same
:func:`~evalnb.providers.openai_compat.completion_of`.

The SDK sends the request and hands over its streaming response
(``with_streaming_response``); evalnb splits its bytes into server-sent events itself, reads
each as plain JSON, and builds the one ``ChatCompletion`` at the end the way the SDK builds a
non-streamed one. The SDK's own iterator constructs a typed chunk object per event, about
0.2 ms of CPU each (measured; docs/streaming.md): at one event per token, seconds for a long
reasoning reply, and the CPU a run of many such streams would lack. The SDK's decoder also ends quietly when
a stream closes cleanly without ``data: [DONE]``: a stream without a ``finish_reason`` is cut,
not complete. Reasoning arrives as ``delta.reasoning_content`` (DeepSeek, Qwen, vLLM's
reasoning parsers) or ``delta.reasoning``; a refusal as ``delta.refusal`` text; an error
part-way as an event ``{"error": {...}}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import openai
from openai._models import construct_type
from openai.types.chat import ChatCompletion

from evalnb.providers.base import (ERROR_TYPE_STATUS, ProviderError, http_error, is_context_length_error, malformed_reply,
                                   transport_error, unreadable_reply)
from evalnb.providers.streams.base import EventSplitter, StreamedReply, StreamSettings, StreamWatch


def classifier(api_error: Callable[[Any], ProviderError]) -> Callable[[Exception], ProviderError]:
    """What a failure of a streamed call is: the SDK's API errors as ``api_error`` reads them
    (the provider's own classification), a malformed event a malformed reply,
    anything else from the connection transient."""
    def classify(error: Exception) -> ProviderError:
        if isinstance(error, openai.APIError):
            return api_error(error)
        if isinstance(error, ValueError):   # JSONDecodeError
            return unreadable_reply(error)
        return transport_error(error)
    return classify




def stream_error(error: Any) -> ProviderError:
    """An error object inside a 200 stream, classified by the rules of the HTTP status it
    stands for: a numeric ``code`` (vLLM, llama.cpp) or the ``type``; a context overflow is
    a context-length error whatever the server calls it (permanent, as the non-streamed 400
    is); anything unrecognised stays transient. The server's message is kept."""
    detail = error if isinstance(error, dict) else {"message": str(error)}
    message = str(detail.get("message") or detail)
    code, kind = detail.get("code"), str(detail.get("type") or "")
    status = code if isinstance(code, int) and 400 <= code < 600 else ERROR_TYPE_STATUS.get(kind) or \
        ERROR_TYPE_STATUS.get(str(code or ""))
    text_code = str(code) if isinstance(code, str) else (kind or None)
    if is_context_length_error(message, text_code):
        status = 400
    if status is None:
        return ProviderError("transient", f"error event: {message}", code="stream_error")
    return http_error(status, f"error event: {message}", code=text_code)


# A 200 stream that ends before its first event: llama.cpp's server does so when the prompt
# overflows its window (its ValueError goes to its log, not into the stream).
EMPTY_STREAM = "stream_empty"

_decode = json.JSONDecoder().decode   # str in: no encoding to detect, as json.loads does for bytes


def reasoning_of(part: Any) -> str | None:
    """The reasoning an OpenAI-compatible server puts beside a message's content."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(part, name, None)
        if isinstance(value, str) and value:
            return value
    return None


class ChunkAssembly:
    """The chunks of one stream, as they arrive: text, refusal and reasoning pieces, the
    finish reason, the usage, and the first chunk (id, model, fingerprint)."""

    def __init__(self, watch: StreamWatch) -> None:
        self.watch = watch
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.finish: str | None = None
        self.usage: Any = None
        self.timings: Any = None
        self.first: dict[str, Any] | None = None
        self.done = False

    def add(self, data: bytes) -> None:
        """One event's data. The common event (a piece of content) takes the shortest path:
        a stream may hold one event per token."""
        watch = self.watch
        watch.event()
        if self.done:
            return   # nothing counts after [DONE]
        if data.startswith(b"[DONE]"):
            self.done = True
            return
        chunk = _decode(data.decode("utf-8"))   # a malformed event: a ValueError
        if not isinstance(chunk, dict):
            raise malformed_reply(data.decode("utf-8", "replace"), "an event that is not a JSON object")
        if self.first is None:
            self.first = chunk
        if chunk.get("error"):   # an error part-way, with or without choices beside it
            self._error(chunk["error"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("timings"):   # llama.cpp's server: its own prompt and generation times
            self.timings = chunk["timings"]
        choices = chunk.get("choices")
        if not choices:
            return
        choice = choices[0] if isinstance(choices, list) else None
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(choice, dict) or not isinstance(delta, dict):
            raise malformed_reply(data.decode("utf-8", "replace"), "an event without choices[0].delta")
        content = delta.get("content")
        if content and isinstance(content, str):
            self.text.append(content)
            watch.received(len(content))
        if len(delta) > 1 or content is None:   # anything besides the content: look further
            for pieces, value in ((self.refusal, delta.get("refusal")),
                                  (self.reasoning, delta.get("reasoning_content") or delta.get("reasoning"))):
                if value and isinstance(value, str):
                    pieces.append(value)
                    watch.received(len(value))
        if choice.get("finish_reason"):
            self.finish = choice["finish_reason"]

    @staticmethod
    def _error(error: Any) -> None:
        raise stream_error(error)

    def completion(self) -> ChatCompletion:
        """The non-streamed reply these chunks make, built as the SDK builds one from JSON."""
        first = self.first or {}
        extra = {"reasoning_content": "".join(self.reasoning)} if self.reasoning else {}
        message = {"role": "assistant", "content": "".join(self.text) if self.text else None,
                   "refusal": "".join(self.refusal) or None, **extra}
        assembled = {"id": first.get("id"), "object": "chat.completion", "created": first.get("created"),
                     "model": first.get("model"), "system_fingerprint": first.get("system_fingerprint"),
                     "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
                     "usage": self.usage, **({"timings": self.timings} if self.timings else {})}
        return cast(ChatCompletion, construct_type(type_=ChatCompletion, value=assembled))


async def read_stream(client: openai.AsyncOpenAI, body: dict[str, Any], settings: StreamSettings,
                      api_error: Callable[[Any], ProviderError]) -> StreamedReply:
    """Send ``body`` streamed; the assembled ``ChatCompletion``, the reply's headers, timing."""
    body = body | {"stream": True, "stream_options": {"include_usage": True}}
    async with StreamWatch(settings, classifier(api_error)) as watch:
        chunks, events = ChunkAssembly(watch), EventSplitter()
        async with client.chat.completions.with_streaming_response.create(**body, timeout=settings.sdk_timeout) \
                as response:
            headers = response.headers
            async for raw in response.iter_bytes():
                for data in events.feed(raw):
                    chunks.add(data)
            for data in events.end():
                chunks.add(data)
        if chunks.first is None and not watch.events:
            raise ProviderError("transient", "stream ended before its first event", code=EMPTY_STREAM)
        if chunks.finish is None or chunks.first is None:
            raise watch.incomplete("its finish_reason")
    usage = chunks.usage
    output = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return StreamedReply(chunks.completion(), headers, watch.latency(output))
