"""A fast, dependency-free fake of the OpenAI, Anthropic and Gemini HTTP APIs.

The point is to exercise the *real* official SDKs (``openai``, ``anthropic``,
``google-genai``) in tests and benchmarks without network access.  The server
is a minimal HTTP/1.1 implementation on top of ``asyncio`` streams (stdlib
only) that speaks just enough of each API's non-streaming JSON wire format:

* OpenAI  ``POST /v1/chat/completions``
* Anthropic ``POST /v1/messages``
* Gemini  ``POST /v1beta/models/{model}:generateContent`` (also ``/v1/...``)

Replies are scripted with :class:`Text`, :class:`Refusal`, :class:`Empty`,
:class:`Error` and :class:`Hang`, either queued (:meth:`FakeLLMServer.queue`)
or produced by :attr:`FakeLLMServer.responder`.

In-process use::

    with FakeLLMServer(latency=0.2) as srv:
        srv.queue(Error(429, retry_after=1), Text("hi"))
        client = openai.OpenAI(base_url=srv.url + "/v1", api_key="x")
        ...
        assert srv.count(api="openai") == 2

Out-of-process use (benchmarks)::

    python -m tests.fakeserver --latency 0.2 [--port 0] [--reply-text TEXT]

prints ``READY http://127.0.0.1:PORT`` once listening and serves until
SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import itertools
import json
import math
import re
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Callable, Union
from urllib.parse import unquote

__all__ = [
    "FakeLLMServer",
    "Text",
    "Refusal",
    "Empty",
    "Error",
    "Hang",
    "Raw",
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
    """A normal completion. ``finish`` is ``"stop"`` or ``"length"``."""

    text: str
    finish: str = "stop"


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
    Gemini derive their error type/status string from ``status``.
    """

    status: int
    message: str = "error"
    code: str | None = None
    retry_after: float | None = None
    retry_after_ms: float | None = None


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


Reply = Union[Text, Refusal, Empty, Error, Hang, Raw]


@dataclass
class RecordedRequest:
    api: str  # "openai" | "anthropic" | "gemini"
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any]  # parsed JSON
    model: str  # from the body (openai/anthropic) or the URL path (gemini)
    prompt: str  # "\n"-joined text of all user messages
    time: float  # time.monotonic() on arrival


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
        kind = "server_error" if reply.status >= 500 else "invalid_request_error"
        body: dict[str, Any] = {
            "error": {"message": reply.message, "type": kind, "param": None, "code": reply.code}
        }
        return reply.status, headers | _retry_headers(reply), body

    content: str | None
    refusal: str | None = None
    if isinstance(reply, Text):
        content, finish = reply.text, ("length" if reply.finish == "length" else "stop")
    elif isinstance(reply, Refusal):
        content, refusal, finish = None, reply.message, "content_filter"
    else:  # Empty
        content, finish = "", "stop"
    completion_tokens = _estimate_tokens(content or refusal or "")
    body = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return 200, headers, body


def _anthropic_response(reply: Reply, model: str, n: int, prompt_tokens: int) -> _Response:
    headers = {"request-id": f"req_{n}"}
    if isinstance(reply, Error):
        kind = _ANTHROPIC_ERROR_TYPES.get(
            reply.status, "api_error" if reply.status >= 500 else "invalid_request_error"
        )
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": reply.message}}
        return reply.status, headers | _retry_headers(reply), body

    content: list[dict[str, Any]] = []
    output_tokens = 0
    if isinstance(reply, Text):
        content = [{"type": "text", "text": reply.text}]
        output_tokens = _estimate_tokens(reply.text)
        stop_reason = "max_tokens" if reply.finish == "length" else "end_turn"
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


def _gemini_response(reply: Reply, model: str, n: int, prompt_tokens: int) -> _Response:
    if isinstance(reply, Error):
        status = _GEMINI_ERROR_STATUSES.get(reply.status, "UNKNOWN")
        body: dict[str, Any] = {
            "error": {"code": reply.status, "message": reply.message, "status": status}
        }
        return reply.status, _retry_headers(reply), body

    candidate: dict[str, Any]
    output_tokens = 0
    if isinstance(reply, Text):
        output_tokens = _estimate_tokens(reply.text)
        candidate = {
            "content": {"role": "model", "parts": [{"text": reply.text}]},
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
            "totalTokenCount": prompt_tokens + output_tokens,
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


def _context_length_error(api: str, limit: int, actual: int) -> Error:
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
    if api == "anthropic":
        return Error(400, f"prompt is too long: {actual} tokens > {limit} maximum")
    return Error(
        400,
        f"The input token count ({actual}) exceeds the maximum number of tokens allowed ({limit}).",
    )


# --------------------------------------------------------------------------
# Minimal HTTP/1.1
# --------------------------------------------------------------------------

# Gemini: /v1beta/models/gemini-2.5-flash:generateContent (model may have dots)
_GEMINI_PATH = re.compile(r"^/(?:v1beta|v1|v1alpha)/(?:models/)?(?P<model>[^:]+):generateContent$")

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


def _render_http(status: int, headers: dict[str, str], payload: bytes, close: bool) -> bytes:
    """The whole response as one buffer, so it goes out in a single
    ``writer.write`` (see the TCP_NODELAY note in ``_handle_connection``)."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Overloaded" if status == 529 else "Unknown"
    lines = [
        f"HTTP/1.1 {status} {reason}",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
    ]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


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

    def __init__(self, latency: float = 0.0) -> None:
        self.latency: float = latency
        self.max_prompt_chars: int | None = None
        # Runs on the server's event-loop thread, so it must not block.
        self.responder: Callable[[RecordedRequest], Reply] = lambda r: Text("ok")
        self.requests: list[RecordedRequest] = []
        # Set to False for long benchmarks so request bodies are not retained
        # (``requests`` and ``count`` then stay empty).
        self.keep_requests: bool = True
        self.url: str = ""  # valid after start()
        self.port: int = 0  # port to bind (0 = any free one); the bound port after start()

        self._lock = threading.Lock()
        self._queues: dict[str | None, collections.deque[Reply]] = {}
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
        with self._lock:
            self.requests.clear()
            self._queues.clear()

    def _next_reply(self, req: RecordedRequest) -> Reply:
        with self._lock:
            for key in (req.model, None):
                q = self._queues.get(key)
                if q:
                    return q.popleft()
        return self.responder(req)

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
                    writer.write(_render_http(400, {}, _json_bytes({"error": {"message": str(exc)}}), True))
                    await writer.drain()
                    break
                if http_req is None:
                    break
                close = (
                    http_req.headers.get("connection", "").lower() == "close"
                    or http_req.version == "HTTP/1.0"
                )
                try:
                    status, headers, payload = await self._dispatch(http_req)
                except Exception:  # a bug here should not look like a network error
                    traceback.print_exc()
                    status, headers, payload = 500, {}, {"error": {"message": "fake server crashed"}}
                writer.write(_render_http(status, headers, _json_bytes(payload), close))
                await writer.drain()
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # client went away mid-request (e.g. its timeout fired) or sent junk
        except asyncio.CancelledError:
            pass  # server shutdown
        finally:
            self._conn_tasks.discard(task)
            writer.close()

    async def _dispatch(self, http_req: _HttpRequest) -> _Response:
        arrival = time.monotonic()
        path = unquote(http_req.target.split("?", 1)[0])

        api: str | None = None
        url_model = ""
        if path == "/v1/chat/completions":
            api = "openai"
        elif path == "/v1/messages":
            api = "anthropic"
        elif m := _GEMINI_PATH.match(path):
            api, url_model = "gemini", m.group("model")
        if api is None or http_req.method != "POST":
            return 404, {}, {"error": {"message": f"Not found: {http_req.method} {path}", "code": 404}}

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

        req = RecordedRequest(
            api=api,
            path=path,
            headers=http_req.headers,
            body=body,
            model=model,
            prompt=prompt,
            time=arrival,
        )
        if self.keep_requests:
            with self._lock:
                self.requests.append(req)

        # The reply is chosen on arrival so queued replies are consumed in
        # arrival order; the context-length check does not consume the queue.
        limit = self.max_prompt_chars
        reply: Reply
        if limit is not None and len(prompt) > limit:
            reply = _context_length_error(api, limit, len(prompt))
        else:
            try:
                reply = self._next_reply(req)
            except Exception:
                traceback.print_exc()
                reply = Error(500, "fake server responder raised")

        if self.latency > 0:
            await asyncio.sleep(self.latency)
        if isinstance(reply, Hang):
            await asyncio.sleep(reply.seconds)
            reply = Text("late")
        return self._render(api, reply, model, _estimate_tokens(all_text))

    def _render(self, api: str, reply: Reply, model: str, prompt_tokens: int = 0) -> _Response:
        if isinstance(reply, Raw):
            return reply.status, {}, reply.body
        if not isinstance(reply, (Text, Refusal, Empty, Error)):
            reply = Error(500, f"fake server: unsupported reply {reply!r}")
        return _RENDERERS[api](reply, model, next(self._ids), prompt_tokens)


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds to wait before each reply")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 = pick a free one)")
    parser.add_argument("--reply-text", default=DEFAULT_REPLY_TEXT, help="reply to non-judge prompts")
    args = parser.parse_args(argv)

    server = FakeLLMServer(latency=args.latency)
    server.port = args.port
    server.keep_requests = False  # nobody can read them from another process
    server.responder = functools.partial(default_benchmark_responder, reply_text=args.reply_text)
    asyncio.run(_serve_cli(server))


if __name__ == "__main__":
    sys.exit(main())
