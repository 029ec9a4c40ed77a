"""A streamed message (``stream=True``: the raw events, ``message_start`` through
``message_stop``), assembled into the ``Message`` the non-streamed call returns and read by
the same :func:`~evalnb.providers.anthropic_messages.completion_of`.

The raw events rather than the SDK's ``messages.stream`` helper: the helper rebuilds its
snapshot of the message at every event (a text block grows by string concatenation), which
costs time quadratic in the length of a long answer; here each block's pieces are joined
once. A stream without ``message_stop`` is cut, not complete. An ``error`` event inside a 200
stream (``overloaded_error`` mid-generation) is read by its type, as a batch result's error is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anthropic
from anthropic.types import Message, RedactedThinkingBlock, TextBlock, ThinkingBlock, Usage

from evalnb.providers.base import ERROR_TYPE_STATUS, ProviderError, http_error, transport_error, unreadable_reply
from evalnb.providers.streams.base import StreamedReply, StreamSettings, StreamWatch



def classifier(api_error: Callable[[Any], ProviderError]) -> Callable[[Exception], ProviderError]:
    def classify(error: Exception) -> ProviderError:
        if isinstance(error, anthropic.APIStatusError) and error.status_code == 200:   # an error event
            body: dict[str, Any] = error.body if isinstance(error.body, dict) else {}
            detail: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else {}
            kind = str(detail.get("type", ""))
            return http_error(ERROR_TYPE_STATUS.get(kind, 500), f"error event {kind or '?'}: {detail.get('message', '')}",
                              error_type=kind or None)
        if isinstance(error, anthropic.APIError):
            return api_error(error)
        if isinstance(error, ValueError):   # JSONDecodeError: a malformed event
            return unreadable_reply(error)
        return transport_error(error)
    return classify


def block_of(start: Any, pieces: list[str], signature: list[str]) -> Any:
    """A content block as the non-streamed message carries it."""
    if start.type == "text":
        return TextBlock.model_construct(type="text", text="".join(pieces), citations=None)
    if start.type == "thinking":
        return ThinkingBlock.model_construct(type="thinking", thinking="".join(pieces),
                                             signature="".join(signature))
    if start.type == "redacted_thinking":
        return RedactedThinkingBlock.model_construct(type="redacted_thinking", data=start.data)
    return start   # tool use and the like: not read by evalnb, kept as started


async def read_stream(client: anthropic.AsyncAnthropic, kwargs: dict[str, Any], settings: StreamSettings,
                      api_error: Callable[[Any], ProviderError]) -> StreamedReply:
    """Send ``kwargs`` streamed; the assembled ``Message``, the reply's headers, timing."""
    kwargs = kwargs | {"stream": True, "timeout": settings.sdk_timeout}
    starts: dict[int, Any] = {}
    pieces: dict[int, list[str]] = {}
    signatures: dict[int, list[str]] = {}
    begun = stop_reason = stop_sequence = None
    output_tokens = input_tokens = None
    stopped = False
    async with StreamWatch(settings, classifier(api_error)) as watch:
        stream = await client.messages.create(**kwargs)
        try:
            async for event in stream:
                watch.event()
                kind = event.type
                if kind == "content_block_delta":
                    delta = event.delta
                    piece = getattr(delta, "text", None) if delta.type == "text_delta" else \
                        getattr(delta, "thinking", None) if delta.type == "thinking_delta" else None
                    if piece:
                        pieces.setdefault(event.index, []).append(piece)
                        watch.received(len(piece))
                    elif delta.type == "signature_delta":
                        signatures.setdefault(event.index, []).append(delta.signature)
                elif kind == "content_block_start":
                    starts[event.index] = event.content_block
                    initial = getattr(event.content_block, "text", None) or getattr(event.content_block, "thinking", None)
                    if initial:
                        pieces.setdefault(event.index, []).append(initial)
                elif kind == "message_start":
                    begun = event.message
                    input_tokens = begun.usage.input_tokens
                    output_tokens = begun.usage.output_tokens
                elif kind == "message_delta":
                    stop_reason, stop_sequence = event.delta.stop_reason, event.delta.stop_sequence
                    output_tokens = event.usage.output_tokens
                    input_tokens = getattr(event.usage, "input_tokens", None) or input_tokens
                elif kind == "message_stop":
                    stopped = True
        finally:
            await stream.close()
        if begun is None or not stopped:
            raise watch.incomplete("message_stop")
    content = [block_of(starts[i], pieces.get(i, []), signatures.get(i, [])) for i in sorted(starts)]
    usage = Usage.model_construct(input_tokens=input_tokens or 0, output_tokens=output_tokens or 0)
    message = Message.model_construct(id=begun.id, type="message", role="assistant", model=begun.model,
                                      content=content, stop_reason=stop_reason, stop_sequence=stop_sequence,
                                      usage=usage)
    return StreamedReply(message, stream.response.headers, watch.latency(output_tokens))
