"""A streamed chat completion (``stream: true`` with ``stream_options.include_usage``),
assembled into the ``ChatCompletion`` the non-streamed call returns and read by the same
:func:`~evalnb.providers.openai_compat.completion_of` (reading 25).

The SDK's decoder ends quietly when a stream closes cleanly without ``data: [DONE]``, so a
stream without a ``finish_reason`` is taken as cut, not complete. Reasoning arrives as
``delta.reasoning_content`` (DeepSeek, Qwen, vLLM's reasoning parsers) or ``delta.reasoning``;
a refusal as ``delta.refusal`` text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice

from evalnb.providers.base import ProviderError, unreadable_reply
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
    """The reasoning an OpenAI-compatible server puts beside the content (a delta or a message)."""
    for name in ("reasoning_content", "reasoning"):
        value = getattr(part, name, None)
        if isinstance(value, str) and value:
            return value
    return None


async def read_stream(client: openai.AsyncOpenAI, body: dict[str, Any], settings: StreamSettings,
                      api_error: Callable[[Any], ProviderError]) -> StreamedReply:
    """Send ``body`` streamed; the assembled ``ChatCompletion``, the reply's headers, timing."""
    body = body | {"stream": True, "stream_options": {"include_usage": True}}
    text: list[str] = []
    refusal: list[str] = []
    reasoning: list[str] = []
    finish = usage = first = None
    async with StreamWatch(settings, classifier(api_error)) as watch:
        stream = await client.chat.completions.create(**body, timeout=settings.sdk_timeout)
        try:
            async for chunk in stream:
                watch.event()
                first = first or chunk
                if chunk.usage is not None:
                    usage = chunk.usage
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = choice.delta
                if delta is not None:
                    if delta.content:
                        text.append(delta.content)
                        watch.received(len(delta.content))
                    if delta.refusal:
                        refusal.append(delta.refusal)
                        watch.received(len(delta.refusal))
                    thought = reasoning_of(delta)
                    if thought:
                        reasoning.append(thought)
                        watch.received(len(thought))
                if choice.finish_reason is not None:
                    finish = choice.finish_reason
        finally:
            await stream.close()
        if finish is None or first is None:
            raise watch.incomplete("its finish_reason")
    extra: dict[str, Any] = {"reasoning_content": "".join(reasoning)} if reasoning else {}
    message = ChatCompletionMessage.model_construct(role="assistant", content="".join(text) if text else None,
                                                    refusal="".join(refusal) or None, **extra)
    response = ChatCompletion.model_construct(
        id=first.id, object="chat.completion", created=first.created, model=first.model,
        system_fingerprint=first.system_fingerprint, usage=usage,
        choices=[Choice.model_construct(index=0, message=message, finish_reason=finish)])
    return StreamedReply(response, stream.response.headers, watch.latency(usage.completion_tokens if usage else None))
