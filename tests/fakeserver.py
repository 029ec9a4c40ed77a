"""A fast, dependency-free fake of the OpenAI, Anthropic and Gemini HTTP APIs.

The point is to exercise the *real* official SDKs (``openai``, ``anthropic``,
``google-genai``) in tests and benchmarks without network access.  The server
is a minimal HTTP/1.1 implementation on top of ``asyncio`` streams (stdlib
only) that speaks just enough of each API's non-streaming JSON wire format:

* OpenAI  ``POST /v1/chat/completions``
* Anthropic ``POST /v1/messages``
* Gemini  ``POST /v1beta/models/{model}:generateContent`` (also ``/v1/...``)

and each one's streamed form (OpenAI and Anthropic ``"stream": true``, Gemini
``:streamGenerateContent?alt=sse``), rendered by tests/fakestream.py, paced at
:attr:`FakeLLMServer.token_rate` tokens per second when set. :class:`StreamCut`,
:class:`StreamStall` and :class:`MalformedEvent` break a stream part-way; ``Text(reasoning=...)``
carries reasoning in each API's own field (``reasoning_content``, a ``thinking`` block, a thought
part), streamed or not. :attr:`FakeLLMServer.gateway_timeout` plays a gateway in front: a
non-streamed request that has sent nothing for that many seconds gets a 504 page, and a stream
silent that long is dropped.

Replies are scripted with :class:`Text`, :class:`Refusal`, :class:`Empty`,
:class:`Error` and :class:`Hang`, and with the ways a real endpoint or gateway
breaks a reply: :class:`Reset` (connection closed mid-body), :class:`CutOff`
(a complete 200 whose JSON stops half-way), :class:`NotJson`, :class:`Html` and
:class:`WrongShape`.  They are either queued (:meth:`FakeLLMServer.queue`) or
produced by :attr:`FakeLLMServer.responder`.

A seeded random-fault mode (``FakeLLMServer(fault_rate=0.2, fault_seed=0)``)
answers each request not served from a queue, with probability ``fault_rate``,
with one of :data:`FAULT_KINDS`.  It counts injected faults by kind and
successful replies by request identity (:func:`request_identity`), so a soak
can detect a successful call made twice; ``GET /_stats`` returns the counters
as JSON for out-of-process use.

In-process use::

    with FakeLLMServer(latency=0.2) as srv:
        srv.queue(Error(429, retry_after=1), Text("hi"))
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x")
        ...
        assert srv.count(api="openai") == 2

Out-of-process use (benchmarks)::

    python -m tests.fakeserver --latency 0.2 [--port 0] [--reply-text TEXT] \
        [--fault-rate 0.2 --fault-seed 0 --fault-kinds 429,500,cutoff --timeout-hang 60] \
        [--token-rate 400 --stream-chunk-chars 16]

prints ``READY http://127.0.0.1:PORT`` once listening and serves until
SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import functools
import hashlib
import itertools
import json
import math
import random
import re
import signal
import socket
import threading
import time
import traceback
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Callable, Iterable, Union
from urllib.parse import unquote

from tests.fakestream import CHUNK_CHARS, RENDERERS as STREAM_RENDERERS, Script, Timing, write_stream

__all__ = [
    "FakeLLMServer",
    "Text",
    "Refusal",
    "Empty",
    "Error",
    "Hang",
    "Raw",
    "Reset",
    "CutOff",
    "NotJson",
    "Html",
    "WrongShape",
    "StreamCut",
    "StreamStall",
    "MalformedEvent",
    "FAULT_KINDS",
    "ENDPOINT_ERROR_KINDS",
    "endpoint_error",
    "gemini_rate_limit",
    "CONTEXT_STYLES",
    "fault_reply",
    "request_identity",
    "Reply",
    "RecordedRequest",
    "default_benchmark_responder",
    "DEFAULT_REPLY_TEXT",
]


# --------------------------------------------------------------------------
# Scripted replies
# --------------------------------------------------------------------------


@dataclass
class Text:
    """A normal completion. ``finish`` is ``"stop"`` or ``"length"``. ``reasoning``: returned
    apart from the answer, in the API's own field (none when empty)."""

    text: str
    finish: str = "stop"
    reasoning: str = ""


@dataclass
class Refusal:
    """A safety refusal in the API's native shape."""

    message: str = "I can't help with that."


@dataclass
class Empty:
    """A 200 response that carries no text at all."""


@dataclass
class Error:
    """An HTTP error in the API's native error envelope.

    ``code`` is only used by the OpenAI shape (``error.code``); Anthropic and
    Gemini derive their error type/status string from ``status``, unless
    ``error_type`` names it (OpenAI ``error.type``, Anthropic ``error.type``, Gemini
    ``error.status``). ``details`` are Gemini's ``error.details`` entries.
    ``retry_after`` and ``retry_after_ms`` become the ``Retry-After`` and
    ``retry-after-ms`` headers (every API); ``retry_delay`` (seconds) is Gemini's
    hint, ``RetryInfo.retryDelay`` in ``error.details``, and only the Gemini shape
    carries it. :func:`endpoint_error` gives each API's real refusals of a key, a
    model or an account.
    """

    status: int
    message: str = "error"
    code: str | None = None
    retry_after: float | None = None
    retry_after_ms: float | None = None
    retry_delay: float | None = None
    error_type: str | None = None
    details: list[dict[str, Any]] | None = None


@dataclass
class Hang:
    """Sleep ``seconds`` before answering (to trigger client timeouts), then
    answer ``Text("late")`` if the client is still there."""

    seconds: float = 3600.0


@dataclass
class Raw:
    """A literal JSON body with a status, for shapes the other replies do not cover
    (e.g. a Gemini prompt blocked before any candidate)."""

    body: dict[str, Any]
    status: int = 200


@dataclass
class Reset:
    """A normal completion of ``text`` whose connection is closed mid-body: the status
    line and headers (``Content-Length`` of the whole body) and the first ``fraction``
    of the body are sent, then the server closes the connection."""

    text: str = "this answer never arrives whole"
    fraction: float = 0.5


@dataclass
class CutOff:
    """A 200 whose JSON body (a completion of ``text``) stops ``fraction`` of the way
    through. ``Content-Length`` matches the bytes sent: the HTTP exchange is complete
    and only the body is invalid JSON."""

    text: str = "this answer was cut off"
    fraction: float = 0.5


@dataclass
class NotJson:
    """A 200 labelled ``application/json`` whose body is plain text, as a broken
    gateway or proxy sends."""

    body: str = "upstream connect error or disconnect/reset before headers. reset reason: overflow"


_GATEWAY_PAGE = (
    "<!DOCTYPE html>\n<html><head><title>Service temporarily unavailable</title></head>\n"
    "<body><h1>Please wait</h1><p>The upstream service is busy. This page refreshes "
    "automatically.</p></body></html>\n"
)


@dataclass
class Html:
    """A 200 ``text/html`` page: what a gateway or captive portal answers."""

    body: str = _GATEWAY_PAGE


@dataclass
class WrongShape:
    """Well-formed JSON of the wrong shape for the API: the field that carries the
    answer (OpenAI ``choices``, Anthropic ``content``, Gemini ``candidates``) is
    absent, or present as ``null`` when ``null`` is true."""

    null: bool = False


@dataclass
class StreamCut:
    """A streamed completion of ``text`` whose connection closes after ``fraction`` of its
    events (no terminating chunk). Asked without streaming: a :class:`Reset`."""

    text: str = "this answer never arrives whole"
    fraction: float = 0.5


@dataclass
class StreamStall:
    """A streamed completion of ``text`` that goes silent for ``seconds`` after ``fraction``
    of its events, then goes on. Asked without streaming: the answer ``seconds`` late."""

    text: str = "this answer stalls half-way"
    fraction: float = 0.5
    seconds: float = 3600.0


@dataclass
class MalformedEvent:
    """A streamed completion of ``text`` with an event whose JSON stops half-way after
    ``fraction`` of its events. Asked without streaming: a :class:`CutOff`."""

    text: str = "this answer has a broken event"
    fraction: float = 0.5


Reply = Union[Text, Refusal, Empty, Error, Hang, Raw, Reset, CutOff, NotJson, Html, WrongShape,
              StreamCut, StreamStall, MalformedEvent]


@dataclass
class RecordedRequest:
    api: str  # "openai" | "anthropic" | "gemini"
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]  # parsed JSON
    model: str  # from the body (openai/anthropic) or the URL path (gemini)
    prompt: str  # "\n"-joined text of all user messages
    time: float  # time.monotonic() on arrival
    response: bytes = b""  # the reply body as sent (only the part sent, for a Reset)
    streamed: bool = False  # asked for a stream (the body's "stream", Gemini's streamGenerateContent)
    timing: Timing = dataclasses.field(default_factory=Timing)  # first token and last byte as sent


def request_identity(api: str, model: str, prompt: str) -> str:
    """A stable name for "the same call": equal for a retry or a rerun of one call."""
    return hashlib.sha256("\0".join((api, model, prompt)).encode("utf-8")).hexdigest()[:16]


DEFAULT_REPLY_TEXT = "The answer is in the document."
_JUDGE_MARKER = 'Reply JSON: {"points_awarded"'
_JUDGE_REPLY = '{"points_awarded":[50],"total":50}'


def default_benchmark_responder(
    request: RecordedRequest, reply_text: str = DEFAULT_REPLY_TEXT
) -> Reply:
    """Responder used by the CLI: judge-shaped prompts get a valid judge JSON,
    everything else gets ``reply_text``."""
    if _JUDGE_MARKER in request.prompt:
        return Text(_JUDGE_REPLY)
    return Text(reply_text)


# --------------------------------------------------------------------------
# Helpers: prompt extraction and token estimation
# --------------------------------------------------------------------------


def _estimate_tokens(text: str) -> int:
    """~4 characters per token; at least 1 for non-empty text."""
    return math.ceil(len(text) / 4) if text else 0


_WORD_PIECES = re.compile(r"[\u4e00-\u9fff]|[A-Za-z]+|\d|[^\sA-Za-z\d\u4e00-\u9fff]")


def word_tokens(text: str) -> int:
    """A tokenizer unlike characters-per-token: each ideograph, digit and punctuation mark
    is a token, each word one token per six letters begun (real English text runs about four
    characters a token this way, like a real BPE vocabulary's)."""
    return sum(-(-len(piece) // 6) if piece.isalpha() and piece.isascii() else 1
               for piece in _WORD_PIECES.findall(text))


def _content_text(content: Any) -> str:
    """Text of an OpenAI/Anthropic message ``content``: a str or a list of
    parts; only text parts count (images, tool calls... are ignored)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "\n".join(texts)
    return ""


def _gemini_parts_text(content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts") or []
    return "\n".join(
        p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _messages_prompt(body: dict[str, Any]) -> tuple[str, str]:
    """(user prompt, all text) for OpenAI- and Anthropic-shaped bodies."""
    user: list[str] = []
    everything: list[str] = []
    system = body.get("system")  # Anthropic top-level system prompt
    if system is not None:
        everything.append(_content_text(system))
    for msg in body.get("messages") or []:
        if not isinstance(msg, dict):
            continue
        text = _content_text(msg.get("content"))
        everything.append(text)
        if msg.get("role") == "user":
            user.append(text)
    return "\n".join(user), "\n".join(everything)


def _gemini_prompt(body: dict[str, Any]) -> tuple[str, str]:
    user: list[str] = []
    everything: list[str] = []
    system = body.get("systemInstruction", body.get("system_instruction"))
    if system is not None:
        everything.append(_gemini_parts_text(system))
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        text = _gemini_parts_text(content)
        everything.append(text)
        if content.get("role", "user") in ("user", None):
            user.append(text)
    return "\n".join(user), "\n".join(everything)


# --------------------------------------------------------------------------
# Helpers: response rendering per API
# --------------------------------------------------------------------------

# (status, extra headers, JSON body)
_Response = tuple[int, dict[str, str], dict[str, Any]]

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_GEMINI_ERROR_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _retry_headers(err: Error) -> dict[str, str]:
    headers: dict[str, str] = {}
    if err.retry_after is not None:
        headers["Retry-After"] = f"{err.retry_after:g}"
    if err.retry_after_ms is not None:
        headers["retry-after-ms"] = f"{err.retry_after_ms:g}"
    return headers


def _openai_response(reply: Reply, model: str, n: int, prompt_tokens: int) -> _Response:
    headers = {"x-request-id": f"req_{n}"}
    if isinstance(reply, Error):
        kind = reply.error_type or ("server_error" if reply.status >= 500 else "invalid_request_error")
        body: dict[str, Any] = {
            "error": {"message": reply.message, "type": kind, "param": None, "code": reply.code}
        }
        return reply.status, headers | _retry_headers(reply), body

    content: str | None
    refusal: str | None = None
    reasoning = reply.reasoning if isinstance(reply, Text) else ""
    if isinstance(reply, Text):
        content, finish = reply.text, ("length" if reply.finish == "length" else "stop")
    elif isinstance(reply, Refusal):
        content, refusal, finish = None, reply.message, "content_filter"
    else:  # Empty
        content, finish = "", "stop"
    completion_tokens = _estimate_tokens(content or refusal or "") + _estimate_tokens(reasoning)
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                             "total_tokens": prompt_tokens + completion_tokens}
    if reasoning:   # as DeepSeek, Qwen and vLLM's reasoning parsers return it
        message["reasoning_content"] = reasoning
        usage["completion_tokens_details"] = {"reasoning_tokens": _estimate_tokens(reasoning)}
    body = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish,
            }
        ],
        "usage": usage,
    }
    return 200, headers, body


def _anthropic_response(reply: Reply, model: str, n: int, prompt_tokens: int) -> _Response:
    headers = {"request-id": f"req_{n}"}
    if isinstance(reply, Error):
        kind = reply.error_type or _ANTHROPIC_ERROR_TYPES.get(
            reply.status, "api_error" if reply.status >= 500 else "invalid_request_error"
        )
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": reply.message}}
        return reply.status, headers | _retry_headers(reply), body

    content: list[dict[str, Any]] = []
    output_tokens = 0
    if isinstance(reply, Text):
        content = [{"type": "text", "text": reply.text}]
        output_tokens = _estimate_tokens(reply.text) + _estimate_tokens(reply.reasoning)
        stop_reason = "max_tokens" if reply.finish == "length" else "end_turn"
        if reply.reasoning:   # a thinking block first; no text block when the budget ran out in it
            thinking = {"type": "thinking", "thinking": reply.reasoning, "signature": "sig"}
            content = [thinking] + ([] if reply.finish == "length" and not reply.text else content)
    elif isinstance(reply, Refusal):
        stop_reason = "refusal"
    else:  # Empty
        stop_reason = "end_turn"
    body = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": prompt_tokens, "output_tokens": output_tokens},
    }
    return 200, headers, body


def _gemini_retry_details(delay: float) -> list[dict[str, Any]]:
    """Google's real 429 details: RetryInfo comes after QuotaFailure and Help, so a
    client must look it up by ``@type``, not by position."""
    return [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel",
                    "quotaValue": "10",
                }
            ],
        },
        {
            "@type": "type.googleapis.com/google.rpc.Help",
            "links": [{"description": "Learn more about Gemini API quotas",
                       "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}],
        },
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{delay:g}s"},
    ]


def _gemini_response(reply: Reply, model: str, n: int, prompt_tokens: int) -> _Response:
    if isinstance(reply, Error):
        status = reply.error_type or _GEMINI_ERROR_STATUSES.get(reply.status, "UNKNOWN")
        error: dict[str, Any] = {"code": reply.status, "message": reply.message, "status": status}
        if reply.details is not None:   # its own details, and a RetryInfo after them if asked
            retry = _gemini_retry_details(reply.retry_delay)[-1:] if reply.retry_delay is not None else []
            error["details"] = list(reply.details) + retry
        elif reply.retry_delay is not None:
            error["details"] = _gemini_retry_details(reply.retry_delay)
        return reply.status, _retry_headers(reply), {"error": error}

    candidate: dict[str, Any]
    output_tokens = 0
    thoughts = 0
    if isinstance(reply, Text):
        output_tokens = _estimate_tokens(reply.text)
        thoughts = _estimate_tokens(reply.reasoning)
        parts = ([{"text": reply.reasoning, "thought": True}] if reply.reasoning else []) + [{"text": reply.text}]
        candidate = {
            "content": {"role": "model", "parts": parts},
            "finishReason": "MAX_TOKENS" if reply.finish == "length" else "STOP",
            "index": 0,
        }
    elif isinstance(reply, Refusal):
        candidate = {"finishReason": "SAFETY", "index": 0}
    else:  # Empty
        candidate = {"content": {"role": "model", "parts": []}, "finishReason": "STOP", "index": 0}
    body = {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens + thoughts,
            **({"thoughtsTokenCount": thoughts} if thoughts else {}),
        },
        "modelVersion": f"{model}-fake-001",
        "responseId": f"resp_{n}",
    }
    return 200, {}, body


_RENDERERS: dict[str, Callable[[Reply, str, int, int], _Response]] = {
    "openai": _openai_response,
    "anthropic": _anthropic_response,
    "gemini": _gemini_response,
}


def _wrong_shape(api: str, model: str, n: int, prompt_tokens: int, null: bool) -> dict[str, Any]:
    """Valid JSON that looks like the API's reply but lacks the field carrying the answer."""
    if api == "openai":
        body: dict[str, Any] = {"object": "chat.completion", "id": f"chatcmpl-{n}"}
        answer_field = "choices"
    elif api == "anthropic":
        body = {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": model,
            "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": 0},
        }
        answer_field = "content"
    else:
        body = {
            "usageMetadata": {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens},
            "modelVersion": f"{model}-fake-001", "responseId": f"resp_{n}",
        }
        answer_field = "candidates"
    if null:
        body[answer_field] = None
    return body


# --------------------------------------------------------------------------
# Endpoint refusals: a key, a model, an account
# --------------------------------------------------------------------------

ENDPOINT_ERROR_KINDS = ("401", "403", "404", "402", "quota")


def _google_info(reason: str) -> dict[str, Any]:
    return {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason, "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"}}


def _google_quota(quota_id: str, value: str) -> dict[str, Any]:
    return {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
        {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
         "quotaId": quota_id, "quotaDimensions": {"location": "global", "model": "gemini-x"}, "quotaValue": value}]}


_QUOTA_MESSAGE = ("You exceeded your current quota, please check your plan and billing details. For more "
                  "information on this error, read the docs.")

# kind -> api -> the reply as that API sends it (messages and codes as the real services word them).
_ENDPOINT_ERRORS: dict[str, dict[str, Error]] = {
    "401": {
        "openai": Error(401, "Incorrect API key provided: sk-wr***ng. You can find your API key in your account "
                             "settings.", code="invalid_api_key"),
        "anthropic": Error(401, "invalid x-api-key"),
        # Gemini says a wrong key with a 400, not a 401: ErrorInfo reason API_KEY_INVALID.
        "gemini": Error(400, "API key not valid. Please pass a valid API key.",
                        details=[_google_info("API_KEY_INVALID")]),
    },
    "403": {
        "openai": Error(403, "Country, region, or territory not supported", code="unsupported_country_region_territory",
                        error_type="request_forbidden"),
        "anthropic": Error(403, "Your API key does not have permission to use the specified resource."),
        "gemini": Error(403, "Generative Language API has not been used in project 0 before or it is disabled.",
                        details=[_google_info("SERVICE_DISABLED")]),
    },
    "404": {
        "openai": Error(404, "The model `contestant-x` does not exist or you do not have access to it.",
                        code="model_not_found"),
        "anthropic": Error(404, "model: contestant-x"),
        "gemini": Error(404, "models/contestant-x is not found for API version v1beta, or is not supported for "
                             "generateContent. Call ListModels to see the list of available models."),
    },
    "402": {   # OpenAI sends no 402; a gateway in front of it does (OpenRouter: "Insufficient credits")
        "openai": Error(402, "Insufficient credits. Add more using https://example.invalid/credits"),
        "anthropic": Error(402, "There is an issue with your account's billing."),
        "gemini": Error(400, "Billing has been disabled for this project.", error_type="FAILED_PRECONDITION",
                        details=[_google_info("BILLING_DISABLED")]),
    },
    "quota": {
        "openai": Error(429, _QUOTA_MESSAGE, code="insufficient_quota", error_type="insufficient_quota"),
        "anthropic": Error(400, "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
                                "Billing to upgrade or purchase credits."),
        # A daily free-tier quota used up: it refills tomorrow, not within the run.
        "gemini": Error(429, _QUOTA_MESSAGE, retry_delay=20.0,
                        details=[_google_quota("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "250")]),
    },
}


def endpoint_error(kind: str, api: str) -> Error:
    """The reply with which ``api`` refuses a request for reasons of its own: ``401`` a key it
    rejects, ``403`` a permission it withholds, ``404`` a model it does not have, ``402`` a billing
    problem, ``quota`` an exhausted account (OpenAI's ``insufficient_quota``, Anthropic's credit
    balance, Gemini's daily quota). A route it does not have is any unknown path (404)."""
    return dataclasses.replace(_ENDPOINT_ERRORS[kind][api])


def gemini_rate_limit() -> Error:
    """Gemini's per-minute limit: the same RESOURCE_EXHAUSTED and wording as its daily quota, but a
    quota that refills within a minute (a rate limit, not an endpoint failure)."""
    return Error(429, _QUOTA_MESSAGE, retry_delay=0.01,
                 details=[_google_quota("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "10")])


# Values of FakeLLMServer.context_style: which wording a too-long prompt gets.
# Only Anthropic has two; the other APIs always use their one wording.
CONTEXT_STYLES = ("too_long", "exceed_limit")


def _context_length_error(api: str, limit: int, actual: int, max_tokens: int = 0,
                          style: str = "too_long") -> Error:
    """The API-native "prompt too long" error. The numbers are characters (the
    unit of ``max_prompt_chars``) even where the real API says "tokens", so a
    client that parses the message learns the exact limit."""
    if api == "openai":
        return Error(
            400,
            f"This model's maximum context length is {limit} characters. "
            f"However, your messages resulted in {actual} characters.",
            code="context_length_exceeded",
        )
    if api == "anthropic" and style == "exceed_limit":
        return Error(
            400,
            f"input length and `max_tokens` exceed context limit: {actual} + {max_tokens} > {limit}, "
            "decrease input length or `max_tokens` and try again",
        )
    if api == "anthropic":
        return Error(400, f"prompt is too long: {actual} tokens > {limit} maximum")
    return Error(
        400,
        f"The input token count ({actual}) exceeds the maximum number of tokens allowed ({limit}).",
    )


# --------------------------------------------------------------------------
# Random faults
# --------------------------------------------------------------------------

# Everything a provider or a gateway in front of it does to a call, in the
# random-fault mode.  "429_hint" carries each API's retry hint (Retry-After for
# OpenAI and Anthropic, RetryInfo.retryDelay for Gemini); "hang" answers after
# the server's ``timeout_hang`` seconds, meant to exceed the client's timeout.
FAULT_KINDS = (
    "429_hint", "429", "500", "503", "529", "reset", "hang",
    "cutoff", "not_json", "html", "wrong_shape",
)


def fault_reply(kind: str, api: str, *, hint: float, hang: float) -> Reply:
    """The scripted reply that injects fault ``kind`` on ``api``."""
    if kind == "429_hint":
        if api == "gemini":
            return Error(429, "Resource has been exhausted (e.g. check quota).", retry_delay=hint)
        return Error(429, "Rate limit reached; please try again later.", retry_after=hint)
    if kind in ("429", "500", "503", "529"):
        return Error(int(kind), f"injected fault {kind}")
    replies: dict[str, Reply] = {
        "reset": Reset(), "hang": Hang(hang), "cutoff": CutOff(), "not_json": NotJson(),
        "html": Html(), "wrong_shape": WrongShape(),
    }
    return replies[kind]


def _check_fault_kinds(kinds: Iterable[str]) -> tuple[str, ...]:
    kinds = tuple(kinds)
    unknown = sorted(set(kinds) - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(FAULT_KINDS)}")
    if not kinds:
        raise ValueError("fault_kinds: at least one kind")
    return kinds


# --------------------------------------------------------------------------
# Minimal HTTP/1.1
# --------------------------------------------------------------------------

# Gemini: /v1beta/models/gemini-2.5-flash:generateContent (model may have dots)
_GEMINI_PATH = re.compile(r"^/(?:v1beta|v1|v1alpha)/(?:models/)?(?P<model>[^:]+):(?P<method>generateContent|"
                          r"streamGenerateContent)$")

# StreamReader buffer limit.  It bounds the longest header block
# (``readuntil``), and it is also the flow-control high-water mark: with the
# default 64 KiB a 12 MB body would pause/resume the transport hundreds of times.
_READER_LIMIT = 16 * 1024 * 1024


class _BadRequest(Exception):
    pass


@dataclass
class _HttpRequest:
    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes


@dataclass
class _Wire:
    """A response as it goes on the wire."""

    status: int
    headers: dict[str, str]
    payload: bytes
    content_type: str = "application/json"
    # Reset: send only this many bytes of the payload (Content-Length still
    # announces all of it), then close the connection.
    send_only: int | None = None
    # A successful answer to this request identity: counted when it goes out to a
    # client still waiting for it.
    success_of: str | None = None
    # A stream: written by this instead of the payload; returns False when it closed part-way.
    stream: Callable[[asyncio.StreamWriter], Any] | None = None
    record: RecordedRequest | None = None   # whose timing the answer's last byte goes into

    @property
    def sent_payload(self) -> bytes:
        return self.payload if self.send_only is None else self.payload[: self.send_only]


def _json_wire(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> _Wire:
    return _Wire(status, headers or {}, _json_bytes(body))


def _cut_point(size: int, fraction: float) -> int:
    """Strictly inside the body, so a JSON object cut there never parses."""
    return min(size - 1, max(1, int(size * fraction)))


def _render_http(wire: _Wire, close: bool) -> bytes:
    """The whole response as one buffer, so it goes out in a single
    ``writer.write`` (see the TCP_NODELAY note in ``_handle_connection``)."""
    try:
        reason = HTTPStatus(wire.status).phrase
    except ValueError:
        reason = "Overloaded" if wire.status == 529 else "Unknown"
    lines = [
        f"HTTP/1.1 {wire.status} {reason}",
        f"Content-Type: {wire.content_type}",
        f"Content-Length: {len(wire.payload)}",
    ]
    lines += [f"{k}: {v}" for k, v in wire.headers.items()]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + wire.sent_payload


async def _read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _HttpRequest | None:
    """Read one request; ``None`` on a clean EOF between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None  # client closed an idle keep-alive connection
        raise _BadRequest("truncated request head") from exc
    except asyncio.LimitOverrunError as exc:
        raise _BadRequest("request head too large") from exc

    lines = head[:-4].decode("latin-1").split("\r\n")
    while lines and not lines[0]:  # tolerate stray CRLFs between requests
        lines.pop(0)
    try:
        method, target, version = lines[0].split(" ", 2)
    except (IndexError, ValueError) as exc:
        raise _BadRequest("malformed request line") from exc
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise _BadRequest("malformed header line")
        name, value = name.strip().lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value

    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    if "chunked" in headers.get("transfer-encoding", "").lower():
        chunks: list[bytes] = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise _BadRequest("bad chunk size") from exc
            if size == 0:
                # Skip optional trailers up to the terminating empty line.
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            chunks.append(await reader.readexactly(size))
            await reader.readexactly(2)  # CRLF after each chunk
        body = b"".join(chunks)
    else:
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError as exc:
            raise _BadRequest("bad Content-Length") from exc
        body = await reader.readexactly(length) if length > 0 else b""
    return _HttpRequest(method.upper(), target, version.upper(), headers, body)


# --------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------


class FakeLLMServer:
    """Fake OpenAI/Anthropic/Gemini endpoint; see the module docstring."""

    def __init__(
        self,
        latency: float = 0.0,
        *,
        fault_rate: float = 0.0,
        fault_seed: int = 0,
        fault_kinds: Iterable[str] = FAULT_KINDS,
        fault_hint: float = 1.0,
        timeout_hang: float = 3600.0,
    ) -> None:
        """``fault_rate``: probability that a request not served from a queue gets a
        random fault of ``fault_kinds`` (drawn from a ``random.Random(fault_seed)``);
        ``fault_hint``: the seconds a "429_hint" fault asks to wait; ``timeout_hang``:
        how long a "hang" fault waits (set it above the client's timeout)."""
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be within [0, 1], got {fault_rate}")
        self.latency: float = latency
        self.max_prompt_chars: int | None = None
        # A window counted in tokens by a tokenizer of its own (``word_tokens``: words and
        # punctuation, not characters), as a real model's is; the prompt tokens it reports
        # are counted the same way. ``reserve_output``: the request's max_tokens is taken
        # from the window too (OpenAI, vLLM), else only the prompt must fit (llama.cpp).
        self.context_tokens: int | None = None
        self.reserve_output: bool = False
        # Which wording a too-long prompt gets (see CONTEXT_STYLES): Anthropic says
        # either "prompt is too long" or "input length and `max_tokens` exceed context limit".
        self.context_style: str = "too_long"
        self.fault_rate, self.fault_seed = fault_rate, fault_seed
        self.fault_kinds = _check_fault_kinds(fault_kinds)
        self.fault_hint, self.timeout_hang = fault_hint, timeout_hang
        # Injected faults by kind, and by request identity then kind.
        self.fault_counts: collections.Counter[str] = collections.Counter()
        self.faults_by_identity: dict[str, collections.Counter[str]] = {}
        # Successful replies (a 200 Text, Refusal or Empty sent to a client still
        # connected) by request identity: a count above 1 is a call that succeeded
        # and was made again anyway.
        self.success_counts: collections.Counter[str] = collections.Counter()
        # Runs on the server's event-loop thread, so it must not block.
        self.responder: Callable[[RecordedRequest], Reply] = lambda r: Text("ok")
        self.requests: list[RecordedRequest] = []
        # Set to False for long benchmarks so request bodies are not retained
        # (``requests`` and ``count`` then stay empty).
        self.keep_requests: bool = True
        self.url: str = ""  # valid after start()
        # Extra APIs served on the same port (tests/fakebatch.py adds the batch APIs): each is
        # called with (request, unquoted path) and returns a reply, or None to pass.
        self.routes: list[Callable[[_HttpRequest, str], _Wire | None]] = []
        self.port: int = 0  # port to bind (0 = any free one); the bound port after start()
        # Output tokens per second (about four characters a token) of every reply: a stream
        # paces its events, a non-streamed reply comes once the whole generation is done.
        self.token_rate: float | None = None
        self.stream_chunk_chars: int = CHUNK_CHARS   # characters of text per streamed event
        # Play a gateway in front: a non-streamed request that sent nothing for this many
        # seconds gets a 504 page; a stream silent for this long is dropped.
        self.gateway_timeout: float | None = None
        # Play a proxy that does not route some paths (e.g. ``:streamGenerateContent``): a request
        # whose path this matches gets the proxy's 404 page; ``unrouted_count`` counts them.
        self.unrouted: re.Pattern[str] | None = None
        self.unrouted_count = 0

        self._lock = threading.Lock()
        self._queues: dict[str | None, collections.deque[Reply]] = {}
        self._fault_rng = random.Random(fault_seed)
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._conn_tasks: set[asyncio.Task[None]] = set()

    # -- scripting ---------------------------------------------------------

    def queue(self, *replies: Reply, model: str | None = None) -> None:
        """Append scripted replies (FIFO). A request first consumes its own
        model's queue, then the shared (``model=None``) queue, then falls back
        to :attr:`responder`."""
        with self._lock:
            self._queues.setdefault(model, collections.deque()).extend(replies)

    def count(self, model: str | None = None, api: str | None = None) -> int:
        with self._lock:
            return sum(
                1
                for r in self.requests
                if (model is None or r.model == model) and (api is None or r.api == api)
            )

    def reset(self) -> None:
        """Forget requests, queues and counters; random faults start over from the seed."""
        with self._lock:
            self.requests.clear()
            self._queues.clear()
            self.fault_counts.clear()
            self.faults_by_identity.clear()
            self.success_counts.clear()
            self._fault_rng = random.Random(self.fault_seed)

    def stats(self) -> dict[str, Any]:
        """The counters as plain JSON (what ``GET /_stats`` returns)."""
        with self._lock:
            return {
                "fault_rate": self.fault_rate,
                "fault_seed": self.fault_seed,
                "fault_kinds": list(self.fault_kinds),
                "faults": dict(self.fault_counts),
                "faults_by_identity": {k: dict(v) for k, v in self.faults_by_identity.items()},
                "successes": dict(self.success_counts),
            }

    def _next_reply(self, req: RecordedRequest, identity: str) -> Reply:
        """Queued replies first; then, in the random-fault mode, maybe a fault; then
        the responder."""
        with self._lock:
            for key in (req.model, None):
                q = self._queues.get(key)
                if q:
                    return q.popleft()
            kind = self._draw_fault()
            if kind is not None:
                self.fault_counts[kind] += 1
                self.faults_by_identity.setdefault(identity, collections.Counter())[kind] += 1
        if kind is not None:
            return fault_reply(kind, req.api, hint=self.fault_hint, hang=self.timeout_hang)
        return self.responder(req)

    def _draw_fault(self) -> str | None:
        """One seeded draw per request (call with the lock held)."""
        if self.fault_rate <= 0 or self._fault_rng.random() >= self.fault_rate:
            return None
        return self._fault_rng.choice(self.fault_kinds)

    def _count_success(self, identity: str) -> None:
        with self._lock:
            self.success_counts[identity] += 1

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> FakeLLMServer:
        """Start serving on a daemon thread with its own event loop; returns
        once the socket is listening."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._listen())
            except BaseException as exc:  # surface bind errors to start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="FakeLLMServer", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            raise failure[0]
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            try:
                fut.result(timeout=10)
            finally:
                loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        self._thread = self._loop = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._handle_connection,
            host="127.0.0.1",
            port=self.port,
            backlog=1024,
            limit=_READER_LIMIT,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        # Connections may be parked in a Hang or an idle keep-alive read.
        tasks = list(self._conn_tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    # -- request handling --------------------------------------------------

    async def _handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conn_tasks.add(task)
        # Nagle + the peer's delayed ACK can add ~40 ms per response on
        # loopback when a response goes out in more than one segment.  asyncio
        # already sets TCP_NODELAY on TCP transports, but be explicit; the
        # single write per response (see _render_http) is the other half.
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
        try:
            while True:
                try:
                    http_req = await _read_request(reader, writer)
                except _BadRequest as exc:
                    writer.write(_render_http(_json_wire(400, {"error": {"message": str(exc)}}), True))
                    await writer.drain()
                    break
                if http_req is None:
                    break
                try:
                    wire = await self._dispatch(http_req)
                except Exception:  # a bug here should not look like a network error
                    traceback.print_exc()
                    wire = _json_wire(500, {"error": {"message": "fake server crashed"}})
                # A Reset ends its connection after part of the body: the client
                # sees EOF before Content-Length bytes arrived.
                close = (
                    http_req.headers.get("connection", "").lower() == "close"
                    or http_req.version == "HTTP/1.0"
                    or wire.send_only is not None
                )
                # A client that timed out or was killed has closed its end: an answer
                # it never reads is not a successful call.
                if wire.stream is not None:
                    if not await wire.stream(writer):
                        break   # cut part-way, or dropped by the gateway: the connection goes
                    if wire.success_of is not None:
                        self._count_success(wire.success_of)
                    continue
                if wire.success_of is not None and not reader.at_eof():
                    self._count_success(wire.success_of)
                writer.write(_render_http(wire, close))
                await writer.drain()
                if wire.record is not None:
                    wire.record.timing.done_at = time.monotonic()
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # client went away mid-request (e.g. its timeout fired) or sent junk
        except asyncio.CancelledError:
            pass  # server shutdown
        finally:
            self._conn_tasks.discard(task)
            writer.close()

    async def _dispatch(self, http_req: _HttpRequest) -> _Wire:
        arrival = time.monotonic()
        path = unquote(http_req.target.split("?", 1)[0])
        if path == "/_stats" and http_req.method == "GET":
            return _json_wire(200, self.stats())
        if self.unrouted is not None and self.unrouted.search(http_req.target):
            with self._lock:
                self.unrouted_count += 1
            page = f"<html><body><h1>404 Not Found</h1><p>Cannot {http_req.method} {path}</p></body></html>"
            return _Wire(404, {}, page.encode(), content_type="text/html; charset=utf-8")
        for route in self.routes:
            routed = route(http_req, path)
            if routed is not None:
                return routed

        api: str | None = None
        url_model = ""
        streamed = False
        if path == "/v1/chat/completions":
            api = "openai"
        elif path == "/v1/messages":
            api = "anthropic"
        elif m := _GEMINI_PATH.match(path):
            api, url_model = "gemini", m.group("model")
            streamed = m.group("method") == "streamGenerateContent"
        if api is None or http_req.method != "POST":
            return _json_wire(404, {"error": {"message": f"Not found: {http_req.method} {path}", "code": 404}})

        try:
            body = json.loads(http_req.body)
            if not isinstance(body, dict):
                raise ValueError("JSON body must be an object")
        except ValueError as exc:
            return self._render(api, Error(400, f"Invalid JSON body: {exc}"), "")

        if api == "gemini":
            model = url_model
            prompt, all_text = _gemini_prompt(body)
        else:
            model = str(body.get("model", ""))
            prompt, all_text = _messages_prompt(body)
            streamed = body.get("stream") is True

        req = RecordedRequest(
            api=api,
            path=path,
            headers=http_req.headers,
            body=body,
            model=model,
            prompt=prompt,
            time=arrival,
            streamed=streamed,
        )
        if self.keep_requests:
            with self._lock:
                self.requests.append(req)

        # The reply is chosen on arrival so queued replies are consumed in
        # arrival order; the context-length check does not consume the queue.
        identity = request_identity(api, model, prompt)
        limit = self.max_prompt_chars
        reply: Reply
        window = self.context_tokens
        budget = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        needed = word_tokens(all_text) + (budget if self.reserve_output else 0) if window is not None else 0
        if limit is not None and len(prompt) > limit:
            max_tokens = body.get("max_tokens")
            reply = _context_length_error(api, limit, len(prompt),
                                          max_tokens if isinstance(max_tokens, int) else 0,
                                          self.context_style)
        elif window is not None and needed > window:
            reply = Error(400, f"Requested tokens ({needed}) exceed context window of {window}",
                          code="context_length_exceeded")
        else:
            try:
                reply = self._next_reply(req, identity)
            except Exception:
                traceback.print_exc()
                reply = Error(500, "fake server responder raised")

        if streamed and isinstance(reply, (Text, Refusal, Empty, Hang, StreamCut, StreamStall, MalformedEvent)):
            return await self._stream(req, reply, identity,
                                      word_tokens(all_text) if window is not None else _estimate_tokens(all_text))
        reply = _unstreamed(reply)
        wait = self.latency + (reply.seconds if isinstance(reply, Hang) else 0.0) + self._generation(reply)
        if self.gateway_timeout is not None and wait > self.gateway_timeout:
            await asyncio.sleep(self.gateway_timeout)   # nothing sent yet: the gateway gives up
            wire = _Wire(504, {}, _GATEWAY_TIMEOUT.encode(), content_type="text/html; charset=utf-8")
            req.response = wire.payload
            return wire
        if wait > 0:
            await asyncio.sleep(wait)
        success = isinstance(reply, (Text, Refusal, Empty))   # a Hang's late answer is not
        if isinstance(reply, Hang):
            reply = Text("late")
        prompt_tokens = word_tokens(all_text) if window is not None else _estimate_tokens(all_text)
        wire = self._render(api, reply, model, prompt_tokens)
        wire.success_of = identity if success else None
        wire.record = req
        req.response = wire.sent_payload
        return wire

    def _generation(self, reply: Reply) -> float:
        """Seconds the whole answer takes at the token rate (a non-streamed reply waits them)."""
        if self.token_rate is None or not isinstance(reply, Text):
            return 0.0
        return (len(reply.text) + len(reply.reasoning)) / 4 / self.token_rate

    async def _stream(self, req: RecordedRequest, reply: Reply, identity: str, prompt_tokens: int) -> _Wire:
        """A streamed answer: its events go out from the connection handler, paced."""
        if self.latency > 0:
            await asyncio.sleep(self.latency)
        success = isinstance(reply, (Text, Refusal, Empty))
        if isinstance(reply, Hang):
            await asyncio.sleep(reply.seconds)
            reply = Text("late")
        script = _script(reply)
        include_usage = bool((req.body.get("stream_options") or {}).get("include_usage")) or req.api != "openai"
        n = next(self._ids)
        events = STREAM_RENDERERS[req.api](script, req.model, n, prompt_tokens, include_usage,
                                           self.stream_chunk_chars)
        headers = {"openai": {"x-request-id": f"req_{n}"}, "anthropic": {"request-id": f"req_{n}"}}.get(req.api, {})

        def send(writer: asyncio.StreamWriter) -> Any:
            return write_stream(writer, req.api, script, events, headers, token_rate=self.token_rate,
                                gateway_timeout=self.gateway_timeout, timing=req.timing)

        return _Wire(200, headers, b"", success_of=identity if success else None, stream=send, record=req)

    def _render(self, api: str, reply: Reply, model: str, prompt_tokens: int = 0) -> _Wire:
        n = next(self._ids)
        if isinstance(reply, Raw):
            return _json_wire(reply.status, reply.body)
        if isinstance(reply, NotJson):
            return _Wire(200, {}, reply.body.encode("utf-8"))
        if isinstance(reply, Html):
            return _Wire(200, {}, reply.body.encode("utf-8"), content_type="text/html; charset=utf-8")
        if isinstance(reply, WrongShape):
            return _json_wire(200, _wrong_shape(api, model, n, prompt_tokens, reply.null))
        if isinstance(reply, (CutOff, Reset)):
            status, headers, body = _RENDERERS[api](Text(reply.text), model, n, prompt_tokens)
            payload = _json_bytes(body)
            cut = _cut_point(len(payload), reply.fraction)
            if isinstance(reply, CutOff):
                return _Wire(status, headers, payload[:cut])
            return _Wire(status, headers, payload, send_only=cut)
        if not isinstance(reply, (Text, Refusal, Empty, Error)):
            reply = Error(500, f"fake server: unsupported reply {reply!r}")
        status, headers, body = _RENDERERS[api](reply, model, n, prompt_tokens)
        return _json_wire(status, body, headers)


_GATEWAY_TIMEOUT = ("<!DOCTYPE html>\n<html><head><title>504 Gateway Timeout</title></head>\n"
                    "<body><h1>504 Gateway Timeout</h1><p>The upstream server did not answer in time.</p>"
                    "</body></html>\n")


def _unstreamed(reply: Reply) -> Reply:
    """A stream fault asked for without streaming: the nearest non-streamed fault."""
    if isinstance(reply, StreamCut):
        return Reset(reply.text, reply.fraction)
    if isinstance(reply, StreamStall):
        return Hang(reply.seconds)
    if isinstance(reply, MalformedEvent):
        return CutOff(reply.text, reply.fraction)
    return reply


def _script(reply: Reply) -> Script:
    """What a streamed reply carries and how it breaks (tests/fakestream.py)."""
    if isinstance(reply, Text):
        return Script(reply.text, reply.reasoning, "length" if reply.finish == "length" else "stop")
    if isinstance(reply, Refusal):
        return Script(finish="refusal", refusal=reply.message)
    if isinstance(reply, Empty):
        return Script(finish="stop")
    if isinstance(reply, StreamCut):
        return Script(reply.text, cut_at=reply.fraction)
    if isinstance(reply, StreamStall):
        return Script(reply.text, stall_at=reply.fraction, stall_seconds=reply.seconds)
    assert isinstance(reply, MalformedEvent)
    return Script(reply.text, malformed_at=reply.fraction)


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


async def _serve_cli(server: FakeLLMServer) -> None:
    await server._listen()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"READY {server.url}", flush=True)
    await stop.wait()
    await server._shutdown()


def _kinds_arg(text: str) -> tuple[str, ...]:
    try:
        return _check_fault_kinds(k.strip() for k in text.split(",") if k.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to wait before each reply")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = pick a free one)")
    parser.add_argument("--reply-text", default=DEFAULT_REPLY_TEXT, help="reply to non-judge prompts")
    parser.add_argument("--fault-rate", type=float, default=0.0,
                        help="probability of a random fault per request (0 = none)")
    parser.add_argument("--fault-seed", type=int, default=0, help="seed of the fault draws")
    parser.add_argument("--fault-kinds", type=_kinds_arg, default=FAULT_KINDS,
                        help=f"comma-separated subset of {','.join(FAULT_KINDS)} (default: all)")
    parser.add_argument("--fault-hint", type=float, default=1.0,
                        help="seconds a 429_hint fault asks the client to wait")
    parser.add_argument("--timeout-hang", type=float, default=60.0,
                        help="seconds a hang fault waits before answering (above the client timeout)")
    parser.add_argument("--token-rate", type=float, default=None,
                        help="output tokens per second (about 4 characters each): streams are paced, "
                             "non-streamed replies wait for the whole generation")
    parser.add_argument("--stream-chunk-chars", type=int, default=CHUNK_CHARS,
                        help="characters of text per streamed event")
    args = parser.parse_args(argv)

    server = FakeLLMServer(latency=args.latency, fault_rate=args.fault_rate, fault_seed=args.fault_seed,
                           fault_kinds=args.fault_kinds, fault_hint=args.fault_hint,
                           timeout_hang=args.timeout_hang)
    server.port = args.port
    server.token_rate, server.stream_chunk_chars = args.token_rate, args.stream_chunk_chars
    server.keep_requests = False  # nobody can read them from another process
    server.responder = functools.partial(default_benchmark_responder, reply_text=args.reply_text)
    asyncio.run(_serve_cli(server))


if __name__ == "__main__":
    main()
