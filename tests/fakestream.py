"""Streamed replies for tests/fakeserver.py: each API's own server-sent events, paced at a
token rate, with the ways a stream breaks.

* OpenAI chat completions (``stream: true``): ``data: {chunk}`` lines, a role chunk first,
  ``delta.reasoning_content`` / ``delta.content`` / ``delta.refusal`` pieces, a chunk with the
  ``finish_reason``, a usage chunk (``choices: []``) when ``stream_options.include_usage``,
  then ``data: [DONE]``.
* Anthropic messages (``stream: true``): ``message_start``, a ``ping``, per block
  ``content_block_start`` / ``_delta`` (``thinking_delta``, ``signature_delta``,
  ``text_delta``) / ``_stop``, ``message_delta`` (stop reason, output usage), ``message_stop``.
* Gemini ``:streamGenerateContent?alt=sse``: ``data: {GenerateContentResponse}`` chunks, thought
  parts flagged ``thought: true``, the last with its ``finishReason`` and the whole usage.

Each stream goes out as HTTP/1.1 chunked ``text/event-stream``. A :class:`Script` says what it
carries and how it breaks: ``cut_at`` closes the connection after that share of the events
(no terminating chunk), ``stall_at`` goes silent for ``stall_seconds`` there, ``malformed_at``
sends an event whose JSON stops half-way. The token counts are the fake server's estimate
(about four characters a token), the same as its non-streamed replies report.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

CHUNK_CHARS = 16   # characters of text per event (about four tokens)


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4) if text else 0


@dataclass
class Script:
    """What one stream carries and how it breaks (fractions of its events)."""

    text: str = ""
    reasoning: str = ""
    finish: str = "stop"          # stop | length | refusal | empty
    refusal: str = ""
    cut_at: float | None = None
    stall_at: float | None = None
    stall_seconds: float = 0.0
    malformed_at: float | None = None


@dataclass
class Event:
    data: bytes
    chars: int = 0                # characters of text or reasoning it carries (paced by the token rate)


@dataclass
class Timing:
    """What the server saw of one stream (time.monotonic())."""

    first_token_at: float | None = None
    done_at: float | None = None
    events: int = 0
    chars: int = 0
    log: list[tuple[float, int]] = field(default_factory=list)   # (sent at, chars) per token event


def pieces(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def _sse(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}\n\n".encode()


def openai_events(s: Script, model: str, n: int, prompt_tokens: int, usage: bool, size: int) -> list[Event]:
    base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model, "system_fingerprint": "fp_fake"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _sse(base | {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    events = [Event(chunk({"role": "assistant", "content": ""}))]
    events += [Event(chunk({"reasoning_content": p}), len(p)) for p in pieces(s.reasoning, size)]
    if s.finish == "refusal":
        events += [Event(chunk({"refusal": p}), len(p)) for p in pieces(s.refusal, size)]
    else:
        events += [Event(chunk({"content": p}), len(p)) for p in pieces(s.text, size)]
    finish = {"refusal": "content_filter", "length": "length"}.get(s.finish, "stop")
    events.append(Event(chunk({}, finish)))
    if usage:
        out = tokens(s.refusal if s.finish == "refusal" else s.text) + tokens(s.reasoning)
        counts: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": out,
                                  "total_tokens": prompt_tokens + out}
        if s.reasoning:
            counts["completion_tokens_details"] = {"reasoning_tokens": tokens(s.reasoning)}
        events.append(Event(_sse(base | {"choices": [], "usage": counts})))
    events.append(Event(b"data: [DONE]\n\n"))
    return events


def anthropic_events(s: Script, model: str, n: int, prompt_tokens: int, usage: bool, size: int) -> list[Event]:
    events = [Event(_sse({"type": "message_start", "message": {
        "id": f"msg_{n}", "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": 1}}}, "message_start")),
        Event(_sse({"type": "ping"}, "ping"))]
    index = 0

    def block(start: dict[str, Any], kind: str, key: str, text: str, extra: list[Event]) -> None:
        nonlocal index
        events.append(Event(_sse({"type": "content_block_start", "index": index, "content_block": start},
                                 "content_block_start")))
        events.extend(Event(_sse({"type": "content_block_delta", "index": index, "delta": {"type": kind, key: p}},
                                 "content_block_delta"), len(p)) for p in pieces(text, size))
        events.extend(extra)
        events.append(Event(_sse({"type": "content_block_stop", "index": index}, "content_block_stop")))
        index += 1

    if s.reasoning:
        signature = Event(_sse({"type": "content_block_delta", "index": index,
                                "delta": {"type": "signature_delta", "signature": "sig"}}, "content_block_delta"))
        block({"type": "thinking", "thinking": "", "signature": ""}, "thinking_delta", "thinking", s.reasoning,
              [signature])
    if s.finish in ("stop", "length") and not (s.finish == "length" and s.reasoning and not s.text):
        block({"type": "text", "text": ""}, "text_delta", "text", s.text, [])
    stop = {"refusal": "refusal", "length": "max_tokens"}.get(s.finish, "end_turn")
    out = tokens(s.text) + tokens(s.reasoning) if s.finish in ("stop", "length") else 0
    events.append(Event(_sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                              "usage": {"output_tokens": out}}, "message_delta")))
    events.append(Event(_sse({"type": "message_stop"}, "message_stop")))
    return events


def gemini_events(s: Script, model: str, n: int, prompt_tokens: int, usage: bool, size: int) -> list[Event]:
    head = {"modelVersion": f"{model}-fake-001", "responseId": f"resp_{n}"}
    partial = {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens}

    def chunk(parts: list[dict[str, Any]] | None, finish: str | None = None, whole: bool = False) -> bytes:
        candidate: dict[str, Any] = {"index": 0}
        if parts is not None:
            candidate["content"] = {"role": "model", "parts": parts}
        if finish:
            candidate["finishReason"] = finish
        return _sse({"candidates": [candidate], "usageMetadata": counts if whole else partial} | head)

    answer = s.text if s.finish in ("stop", "length") else ""
    counts: dict[str, Any] = {"promptTokenCount": prompt_tokens, "candidatesTokenCount": tokens(answer),
                              "totalTokenCount": prompt_tokens + tokens(answer) + tokens(s.reasoning)}
    if s.reasoning:
        counts["thoughtsTokenCount"] = tokens(s.reasoning)
    events = [Event(chunk([{"text": p, "thought": True}]), len(p)) for p in pieces(s.reasoning, size)]
    events += [Event(chunk([{"text": p}]), len(p)) for p in pieces(answer, size)]
    finish = {"refusal": "SAFETY", "length": "MAX_TOKENS"}.get(s.finish, "STOP")
    events.append(Event(chunk(None if s.finish == "refusal" else [], finish, whole=True)))
    return events


RENDERERS: dict[str, Callable[..., list[Event]]] = {
    "openai": openai_events, "anthropic": anthropic_events, "gemini": gemini_events}
MALFORMED = {"openai": b'data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"oo\n\n',
             "anthropic": b'event: content_block_delta\ndata: {"type":"content_block_delta","index\n\n',
             "gemini": b'data: {"candidates":[{"content":{"parts":[{"te\n\n'}


def _at(share: float | None, count: int) -> int | None:
    return None if share is None else min(count - 1, max(1, int(count * share)))


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def write_stream(writer: asyncio.StreamWriter, api: str, script: Script, events: list[Event],
                       headers: dict[str, str], *, token_rate: float | None, gateway_timeout: float | None,
                       timing: Timing) -> bool:
    """Send the events; False when the connection was closed part-way (cut, or a gateway's
    idle limit passed during a silence), so the caller drops it."""
    lines = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "Cache-Control: no-cache",
             "Transfer-Encoding: chunked", *(f"{k}: {v}" for k, v in headers.items())]
    cut, stall, malformed = (_at(script.cut_at, len(events)), _at(script.stall_at, len(events)),
                             _at(script.malformed_at, len(events)))
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    async def quiet(seconds: float) -> bool:
        """A silence; False when a gateway in front would drop the connection meanwhile."""
        if gateway_timeout is not None and seconds > gateway_timeout:
            await writer.drain()
            await asyncio.sleep(gateway_timeout)
            return False
        if seconds > 0:
            await writer.drain()
            await asyncio.sleep(seconds)
        return True

    loop = asyncio.get_running_loop()
    due = loop.time()   # when the next token event is due: the rate holds on average, sleeps' overshoot not summed
    for i, event in enumerate(events):
        if i == cut:
            await writer.drain()
            return False
        if i == stall:
            if not await quiet(script.stall_seconds):
                return False
            due = loop.time()
        if i == malformed:
            writer.write(_chunk(MALFORMED[api]))
        if event.chars and token_rate:
            due += event.chars / 4 / token_rate
            if not await quiet(due - loop.time()):
                return False
        writer.write(_chunk(event.data))
        timing.events += 1
        if event.chars:
            now = time.monotonic()
            timing.first_token_at = timing.first_token_at or now
            timing.chars += event.chars
            timing.log.append((now, event.chars))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    timing.done_at = time.monotonic()
    return True
