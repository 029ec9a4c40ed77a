"""Streaming as transport: when a call streams, and the timeouts,
timing and failure classes every provider's stream shares.

``stream: auto`` (the default) streams a request whose output budget is above
:data:`AUTO_STREAM_ABOVE` tokens, or any request of an endpoint with ``reasoning: true``:
the calls that can run past ten minutes and past a gateway's idle timeout. Every other
request is sent exactly as without streaming. ``stream: true`` / ``false`` force it. A batch
request never streams (a batch API has none); a batch endpoint's call made live (resent
live, or too large for a batch) is a live call and follows the rule.

For a streamed attempt evalnb, not the SDK, enforces three limits (the SDKs do not agree on
what a timeout means for a stream: google-genai's aiohttp transport takes it as a total for
the whole call, the others as a gap between reads):

* ``timeout``: the wait from sending the request to its first event;
* ``stream_idle_timeout``: the silence between two events;
* ``max_call_seconds``: the whole attempt (each retry has its own).

One timer per attempt, re-armed lazily (an event only notes the time), so a stream of
thousands of events costs no timer handle per event. A stream that stalls or breaks
part-way is a transient failure (retried under the one retry policy) whose message says how much had
arrived (characters and events, never the text); a malformed event is a malformed reply, transient too. The SDK's own timeout for a streamed request is set past
``max_call_seconds``, a backstop that never fires first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

from evalnb.providers.base import ChatRequest, Completion, ProviderError, status_of
from evalnb.core.reasoning import joined, split_think
from evalnb.core.types import Latency

AUTO_STREAM_ABOVE = 16_384     # output tokens: a larger budget streams under `stream: auto`
SDK_TIMEOUT_MARGIN = 60.0      # seconds the SDK's own timeout of a stream lies past max_call_seconds


@dataclass(frozen=True)
class StreamSettings:
    """An endpoint's streaming and reply-reading settings, as its provider applies them."""

    mode: str | bool = "auto"
    reasoning: bool = False            # the endpoint is a reasoning model: auto streams it
    first_event_timeout: float = 600.0   # the endpoint's `timeout`
    idle_timeout: float = 120.0
    max_call_seconds: float = 3600.0
    strip_think: bool = False

    def streams(self, request: ChatRequest) -> bool:
        if self.mode == "auto":
            return self.reasoning or request.max_tokens > AUTO_STREAM_ABOVE
        return bool(self.mode)

    @property
    def sdk_timeout(self) -> float:
        """The SDK's own timeout for a streamed request: past every limit evalnb enforces."""
        return max(self.max_call_seconds, self.first_event_timeout, self.idle_timeout) + SDK_TIMEOUT_MARGIN

    def finish(self, completion: Completion, latency: Latency | None, *, streamed: bool = False) -> Completion:
        """The completion as recorded: an inline think block counted (and stripped if asked),
        the attempt's timing attached. The same for a streamed and a non-streamed reply."""
        text, reasoning, think = completion.text, completion.reasoning, None
        split = split_think(text)
        if split is not None:
            think = "stripped" if self.strip_think else "kept"
            if self.strip_think:
                reasoning, text = joined(reasoning, split[0]), split[1]
        status = status_of(text) if completion.status == "ok" else completion.status
        if latency is not None and (seconds := server_seconds(completion.raw.get("server_timings"))) is not None:
            latency = replace(latency, server_s=seconds)
        return replace(completion, text=text, status=status, reasoning=reasoning, think_block=think,
                       latency=latency, streamed=streamed)


def server_seconds(timings: Any) -> float | None:
    """The seconds a server says it spent on a call (llama.cpp's ``prompt_ms`` plus
    ``predicted_ms``); None where it says nothing."""
    if not isinstance(timings, dict):
        return None
    parts = [timings.get(k) for k in ("prompt_ms", "predicted_ms")]
    if not any(isinstance(v, (int, float)) for v in parts):
        return None
    return round(sum(v for v in parts if isinstance(v, (int, float))) / 1000, 3)


DEFAULT_SETTINGS = StreamSettings()   # a provider built without an endpoint's settings


def settings_of(endpoint: Any) -> StreamSettings:
    """The settings of a configured endpoint (an ``EndpointConfig``; duck-typed, as providers
    sit below the configuration)."""
    return StreamSettings(mode=endpoint.stream, reasoning=endpoint.reasoning,
                          first_event_timeout=endpoint.timeout, idle_timeout=endpoint.stream_idle_timeout,
                          max_call_seconds=endpoint.max_call_seconds, strip_think=endpoint.strip_think)


def finish_batch(live: Any, outcome: Any) -> Any:
    """A batch result read as its endpoint reads replies (think blocks); no timing: a batched
    call has no latency of its own."""
    settings = getattr(live, "stream", None)
    if isinstance(outcome, Completion) and isinstance(settings, StreamSettings):
        return settings.finish(outcome, None)
    return outcome


def since(started: float) -> Latency:
    """A non-streamed attempt's timing: sending to the parsed reply (``time.monotonic``)."""
    return Latency(total_s=round(time.monotonic() - started, 3))


class StreamWatch:
    """One streamed attempt: its limits, its timing, and what had arrived when it failed.

    ``async with StreamWatch(settings, classify) as watch:`` around sending the request and
    reading every event; call :meth:`event` for each event and :meth:`received` with the
    characters of text or reasoning it carried. Leaving the block with an exception raises a
    classified :class:`ProviderError` (``classify`` maps the SDK's own errors).
    """

    def __init__(self, settings: StreamSettings, classify: Callable[[Exception], ProviderError]) -> None:
        self.settings, self.classify = settings, classify
        self.events = 0
        self.chars = 0
        self.first_token: float | None = None
        self.ended: float | None = None
        self._fired: str | None = None

    async def __aenter__(self) -> StreamWatch:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self.sent = self.last = self._loop.time()
        self._deadline = self.sent + self.settings.max_call_seconds
        self._handle = self._loop.call_at(min(self.sent + self.settings.first_event_timeout, self._deadline),
                                          self._check)
        return self

    def event(self) -> None:
        self.events += 1
        self.last = self._loop.time()
        if self.events == 1:   # from now on silence is measured: the timer moves to the idle limit
            self._handle.cancel()
            self._handle = self._loop.call_at(min(self.last + self.settings.idle_timeout, self._deadline),
                                              self._check)

    def received(self, chars: int) -> None:
        if chars:
            if self.first_token is None:
                self.first_token = self.last
            self.chars += chars

    def _check(self) -> None:
        now = self._loop.time()
        if now >= self._deadline:
            return self._fire(f"max_call_seconds ({self.settings.max_call_seconds:g} s) passed")
        if not self.events:
            limit, why = self.sent + self.settings.first_event_timeout, "no first event within timeout"
            seconds = self.settings.first_event_timeout
        else:
            limit, why = self.last + self.settings.idle_timeout, "no event within stream_idle_timeout"
            seconds = self.settings.idle_timeout
        if now >= limit:
            return self._fire(f"{why} ({seconds:g} s)")
        self._handle = self._loop.call_at(min(limit, self._deadline), self._check)

    def _fire(self, why: str) -> None:
        self._fired = why
        if self._task is not None:
            self._task.cancel()

    def so_far(self) -> str:
        return f"{self.chars:,} characters in {self.events:,} events received"

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:   # never swallows: re-raises, classified
        self._handle.cancel()   # first, before any await: the timer cannot fire after this
        self.ended = self._loop.time()
        if self._fired is not None:
            if self._task is not None and self._task.cancelling():
                self._task.uncancel()
            raise ProviderError("transient", f"stream stalled: {self._fired}; {self.so_far()}",
                                code="stream_timeout") from None
        if error is None or not isinstance(error, Exception):
            return None   # done, or cancelled from outside: not this call's failure
        failure = error if isinstance(error, ProviderError) else self.classify(error)
        if self.events and failure.code == "malformed_reply":   # a malformed reply, part-way through
            failure = ProviderError("transient", f"{failure.message}; {self.so_far()}", code=failure.code)
        elif self.events and failure.code != "stream_broken":   # the connection or the SDK, part-way
            failure = ProviderError(failure.kind, f"stream broke: {failure.message}; {self.so_far()}",
                                    status_code=failure.status_code, retry_after=failure.retry_after,
                                    code=failure.code or "stream_broken", cause=failure.cause)
        raise failure from None

    def incomplete(self, what: str) -> ProviderError:
        """A stream that ended cleanly without its last event: cut, not complete."""
        return ProviderError("transient", f"stream ended before {what}; {self.so_far()}", code="stream_broken")

    def latency(self, output_tokens: int | None) -> Latency:
        end = self.ended if self.ended is not None else self._loop.time()
        first = self.first_token
        rate = None
        if first is not None and output_tokens and end - first > 0:
            rate = round(output_tokens / (end - first), 2)
        return Latency(total_s=round(end - self.sent, 3),
                       first_token_s=round(first - self.sent, 3) if first is not None else None,
                       output_tokens_per_s=rate)


@dataclass(frozen=True)
class StreamedReply:
    """A stream assembled into the reply object the non-streamed call returns, for the
    provider's one reply reader; with the reply's headers and the attempt's timing."""

    response: Any
    headers: Any
    latency: Latency


class EventSplitter:
    """The data of each server-sent event in a byte stream, as whole events arrive (its
    ``data:`` lines joined; other fields and comments dropped). One pass over each read:
    a stream of thousands of events is read at a few microseconds an event."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, raw: bytes) -> list[bytes]:
        buffer = self._rest + raw if self._rest else raw
        if b"\r" in buffer:   # CRLF line ends (a lone CR at the end waits for its LF)
            buffer = buffer.replace(b"\r\n", b"\n")
        blocks = buffer.split(b"\n\n")
        self._rest = blocks.pop()
        found = []
        for block in blocks:
            data = [line[6:] if line.startswith(b"data: ") else line[5:]
                    for line in block.split(b"\n") if line.startswith(b"data:")]
            if data:
                found.append(data[0] if len(data) == 1 else b"\n".join(data))
        return found

    def end(self) -> list[bytes]:
        """An event the stream ended on without its blank line."""
        return self.feed(b"\n\n") if self._rest.strip() else []
