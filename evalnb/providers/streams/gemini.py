"""A streamed Gemini response (``generate_content_stream``, ``:streamGenerateContent?alt=sse``),
assembled into the ``GenerateContentResponse`` the non-streamed call returns and read by the
same :func:`~evalnb.providers.gemini.completion_of`.

Each chunk carries the next parts of the first candidate (thought parts flagged
``thought: true``), the last one its ``finishReason`` and the usage. A stream that ends
without a finish reason (and without a blocked prompt's ``blockReason``) is cut, not
complete. The SDK's own timeout for the request is set past ``max_call_seconds``: with the
aiohttp transport it is a total for the whole call, and evalnb enforces the real limits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google import genai
from google.genai import errors, types

from evalnb.providers.base import ProviderError, transport_error, unreadable_reply
from evalnb.providers.streams.base import StreamedReply, StreamSettings, StreamWatch


def classifier(api_error: Callable[[Any], ProviderError]) -> Callable[[Exception], ProviderError]:
    def classify(error: Exception) -> ProviderError:
        if isinstance(error, errors.APIError):
            return api_error(error)
        if isinstance(error, ValueError):   # JSONDecodeError, UnknownApiResponseError
            return unreadable_reply(error)
        return transport_error(error)
    return classify


async def read_stream(client: genai.Client, model: str, contents: list[types.Content],
                      config: types.GenerateContentConfig, settings: StreamSettings,
                      api_error: Callable[[Any], ProviderError]) -> StreamedReply:
    """Send the request streamed; the assembled ``GenerateContentResponse``, no headers, timing."""
    config = config.model_copy(update={"http_options": types.HttpOptions(timeout=int(settings.sdk_timeout * 1000))})
    text: list[str] = []
    thoughts: list[str] = []
    finish = usage = last = feedback = None
    candidates = False
    async with StreamWatch(settings, classifier(api_error)) as watch:
        stream = await client.aio.models.generate_content_stream(model=model, contents=contents, config=config)
        try:
            async for chunk in stream:
                watch.event()
                last = chunk
                usage = chunk.usage_metadata or usage
                feedback = chunk.prompt_feedback or feedback
                if not chunk.candidates:
                    continue
                candidates = True
                candidate = chunk.candidates[0]
                for part in (candidate.content.parts or []) if candidate.content else []:
                    if part.text:
                        (thoughts if part.thought else text).append(part.text)
                        watch.received(len(part.text))
                if candidate.finish_reason is not None:
                    finish = candidate.finish_reason
        finally:
            await _close(stream)
        if last is None or (finish is None and not (feedback and feedback.block_reason)):
            raise watch.incomplete("its finishReason")
    parts = ([types.Part(text="".join(thoughts), thought=True)] if thoughts else []) + \
        ([types.Part(text="".join(text))] if text else [])
    response = types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=parts), finish_reason=finish,
                                    index=0)] if candidates else None,
        prompt_feedback=feedback, usage_metadata=usage, model_version=last.model_version,
        response_id=last.response_id)
    output = ((usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)) if usage else None
    return StreamedReply(response, {}, watch.latency(output))


async def _close(stream: Any) -> None:
    """An async generator left part-way is closed now, not when garbage-collected."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
