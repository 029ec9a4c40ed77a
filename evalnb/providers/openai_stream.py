"""A streamed chat completion (``stream: true`` with ``stream_options.include_usage``),
assembled into the ``ChatCompletion`` the non-streamed call returns and read by the same
:func:`~evalnb.providers.openai_compat.completion_of` (reading 25).

The SDK sends the request and hands over its streaming response
(``with_streaming_response``); evalnb reads the server-sent events itself, as plain JSON,
and builds the one ``ChatCompletion`` at the end the way the SDK builds a non-streamed one.
The SDK's own iterator constructs a typed chunk object per event, about 0.2 ms of CPU each
(measured, bench/README.md): at one event per token, seconds for a long reasoning reply,
and the CPU a run of many such streams would lack. The SDK's decoder also ends quietly when
a stream closes cleanly without ``data: [DONE]``: a stream without a ``finish_reason`` is cut,
not complete. Reasoning arrives as ``delta.reasoning_content`` (DeepSeek, Qwen, vLLM's
reasoning parsers) or ``delta.reasoning``; a refusal as ``delta.refusal`` text; an error
part-way as an event ``{"error": {...}}``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
from openai._models import construct_type
from openai.types.chat import ChatCompletion

from evalnb.providers.base import ProviderError, malformed_reply, unreadable_reply
from evalnb.providers.streaming import StreamedReply, StreamSettings, StreamWatch


def classifier(api_error: Callable[[Any], ProviderError]) -> Callable[[Exception], ProviderError]:
    """What a failure of a streamed call is: the SDK's API errors as ``api_error`` reads them
    (the provider's own classification), a malformed event a malformed reply (reading 18),
    anything else from the connection transient."""
    def classify(error: Exception) -> ProviderError:
        if isinstance(error, openai.APIError):
            return api_error(error)
        if isinstance(error, ValueError):   # JSONDecodeError
            return unreadable_reply(error)
        return ProviderError("transient", f"{type(error).__name__}: {error}")
    return classify


def reasoning_of(part: Any) -> str | None:
    """The reasoning an OpenAI-compatible server puts beside a message's content."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(part, name, None)
        if isinstance(value, str) and value:
            return value
    return None


async def events(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The data of each server-sent event (its ``data:`` lines joined), in order."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
    if data:
        yield "\n".join(data)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


async def read_stream(client: openai.AsyncOpenAI, body: dict[str, Any], settings: StreamSettings,
                      api_error: Callable[[Any], ProviderError]) -> StreamedReply:
    """Send ``body`` streamed; the assembled ``ChatCompletion``, the reply's headers, timing."""
    body = body | {"stream": True, "stream_options": {"include_usage": True}}
    text: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    finish: str | None = None
    usage: Any = None
    first: dict[str, Any] | None = None
    async with StreamWatch(settings, classifier(api_error)) as watch:
        async with client.chat.completions.with_streaming_response.create(**body, timeout=settings.sdk_timeout) \
                as response:
            headers = response.headers
            done = False
            async for data in events(response.iter_lines()):
                watch.event()
                if done:
                    continue   # nothing counts after [DONE]
                if data.startswith("[DONE]"):
                    done = True
                    continue
                chunk = json.loads(data)   # a malformed event: JSONDecodeError (reading 18)
                if not isinstance(chunk, dict):
                    raise malformed_reply(data, "an event that is not a JSON object")
                if chunk.get("error"):
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else error
                    raise ProviderError("transient", f"error event: {message}", code="stream_error")
                first = first or chunk
                usage = chunk.get("usage") or usage
                choices = chunk.get("choices")
                if not choices:
                    continue
                choice = choices[0] if isinstance(choices, list) else None
                delta = choice.get("delta") if isinstance(choice, dict) else None
                if not isinstance(choice, dict) or not isinstance(delta, dict):
                    raise malformed_reply(data, "an event without choices[0].delta")
                for pieces, value in ((text, delta.get("content")), (refusal, delta.get("refusal")),
                                      (reasoning, delta.get("reasoning_content") or delta.get("reasoning"))):
                    piece = _text(value)
                    if piece:
                        pieces.append(piece)
                        watch.received(len(piece))
                finish = choice.get("finish_reason") or finish
        if finish is None or first is None:
            raise watch.incomplete("its finish_reason")
    extra = {"reasoning_content": "".join(reasoning)} if reasoning else {}
    message = {"role": "assistant", "content": "".join(text) if text else None, "refusal": "".join(refusal) or None,
               **extra}
    assembled = {"id": first.get("id"), "object": "chat.completion", "created": first.get("created"),
                 "model": first.get("model"), "system_fingerprint": first.get("system_fingerprint"),
                 "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}
    # The construction the SDK applies to a non-streamed reply's JSON.
    response_object = construct_type(type_=ChatCompletion, value=assembled)
    output = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return StreamedReply(response_object, headers, watch.latency(output))
