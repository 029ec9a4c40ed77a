"""Checks tests/fakeserver.py against the real openai / anthropic / google-genai SDKs."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from tests.fakeserver import (
    FAULT_KINDS,
    CutOff,
    Empty,
    Error,
    FakeLLMServer,
    Hang,
    Html,
    NotJson,
    RecordedRequest,
    Refusal,
    Reset,
    Text,
    WrongShape,
    default_benchmark_responder,
    request_identity,
)

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


# SDK clients made by the helpers below; closed after each test so their
# pooled keep-alive sockets do not leak into later tests as ResourceWarnings.
_clients: list[openai.OpenAI | anthropic.Anthropic | genai.Client] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _clients:
        _clients.pop().close()


def openai_client(srv: FakeLLMServer, timeout: float = 10.0) -> openai.OpenAI:
    client = openai.OpenAI(base_url=srv.url + "/v1", api_key="test", max_retries=0, timeout=timeout)
    _clients.append(client)
    return client


def anthropic_client(srv: FakeLLMServer) -> anthropic.Anthropic:
    client = anthropic.Anthropic(base_url=srv.url, api_key="test", max_retries=0, timeout=10.0)
    _clients.append(client)
    return client


def gemini_client(srv: FakeLLMServer) -> genai.Client:
    # Keep the client referenced while in use: Client.__del__ closes the HTTP
    # client that `client.models` shares, so `genai.Client(...).models.x()`
    # can fail if the temporary is collected.
    client = genai.Client(api_key="test", http_options={"base_url": srv.url, "api_version": "v1beta"})
    _clients.append(client)
    return client


def ask_openai(srv: FakeLLMServer, prompt: str = "hello", model: str = "gpt-test") -> openai.types.chat.ChatCompletion:
    return openai_client(srv).chat.completions.create(
        model=model, messages=[{"role": "user", "content": prompt}]
    )


def ask_anthropic(srv: FakeLLMServer, prompt: str = "hello", model: str = "claude-test") -> anthropic.types.Message:
    return anthropic_client(srv).messages.create(
        model=model, max_tokens=64, messages=[{"role": "user", "content": prompt}]
    )


def ask_gemini(
    srv: FakeLLMServer, prompt: str = "hello", model: str = "gemini-2.5-flash"
) -> genai_types.GenerateContentResponse:
    return gemini_client(srv).models.generate_content(model=model, contents=prompt)


# -- successful replies ------------------------------------------------------


def test_openai_text(server: FakeLLMServer) -> None:
    server.queue(Text("hello there"))
    raw = openai_client(server).chat.completions.with_raw_response.create(
        model="gpt-test",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]},
        ],
    )
    assert raw.headers["x-request-id"].startswith("req_")
    resp = raw.parse()
    choice = resp.choices[0]
    assert choice.message.content == "hello there"
    assert choice.finish_reason == "stop"
    assert resp.model == "gpt-test"
    assert resp.usage is not None
    assert resp.usage.completion_tokens == 3  # ceil(11 / 4)
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + 3

    (req,) = server.requests
    assert (req.api, req.model, req.path) == ("openai", "gpt-test", "/v1/chat/completions")
    assert req.prompt == "part one\npart two"  # system message excluded
    assert req.headers["authorization"] == "Bearer test"


def test_anthropic_text(server: FakeLLMServer) -> None:
    server.queue(Text("hello there"))
    raw = anthropic_client(server).messages.with_raw_response.create(
        model="claude-test",
        max_tokens=64,
        system="be brief",
        messages=[
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ],
    )
    assert raw.headers["request-id"].startswith("req_")
    msg = raw.parse()
    assert [b.text for b in msg.content if b.type == "text"] == ["hello there"]
    assert msg.stop_reason == "end_turn"
    assert msg.usage.output_tokens == 3
    assert msg.usage.input_tokens > 0

    (req,) = server.requests
    assert (req.api, req.model) == ("anthropic", "claude-test")
    assert req.prompt == "first\nsecond"


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "models/gemini-2.0-flash-lite-001"])
def test_gemini_text(server: FakeLLMServer, model: str) -> None:
    server.queue(Text("hello there"))
    client = gemini_client(server)
    resp = client.models.generate_content(
        model=model,
        contents=["part one", "part two"],
        config=genai_types.GenerateContentConfig(system_instruction="be brief", temperature=0, max_output_tokens=32),
    )
    assert resp.text == "hello there"
    assert resp.candidates and resp.candidates[0].finish_reason == genai_types.FinishReason.STOP
    assert resp.usage_metadata is not None
    assert resp.usage_metadata.candidates_token_count == 3
    bare_model = model.removeprefix("models/")
    assert resp.model_version == bare_model + "-fake-001"

    (req,) = server.requests
    assert (req.api, req.model) == ("gemini", bare_model)
    assert req.path == f"/v1beta/models/{bare_model}:generateContent"
    assert req.prompt == "part one\npart two"  # systemInstruction excluded
    assert req.body["generationConfig"]["maxOutputTokens"] == 32


def test_finish_length(server: FakeLLMServer) -> None:
    server.queue(Text("cut", finish="length"), Text("cut", finish="length"), Text("cut", finish="length"))
    assert ask_openai(server).choices[0].finish_reason == "length"
    assert ask_anthropic(server).stop_reason == "max_tokens"
    resp = ask_gemini(server)
    assert resp.candidates and resp.candidates[0].finish_reason == genai_types.FinishReason.MAX_TOKENS


def test_refusal(server: FakeLLMServer) -> None:
    server.queue(Refusal("nope"), Refusal(), Refusal())
    choice = ask_openai(server).choices[0]
    assert choice.finish_reason == "content_filter"
    assert choice.message.refusal == "nope"
    assert choice.message.content is None

    msg = ask_anthropic(server)
    assert msg.stop_reason == "refusal"
    assert msg.content == []

    resp = ask_gemini(server)
    assert resp.candidates and resp.candidates[0].finish_reason == genai_types.FinishReason.SAFETY
    assert resp.text is None


def test_empty(server: FakeLLMServer) -> None:
    server.queue(Empty(), Empty(), Empty())
    choice = ask_openai(server).choices[0]
    assert (choice.message.content, choice.finish_reason) == ("", "stop")
    msg = ask_anthropic(server)
    assert (msg.content, msg.stop_reason) == ([], "end_turn")
    assert not ask_gemini(server).text


# -- errors -----------------------------------------------------------------


def test_rate_limit_errors(server: FakeLLMServer) -> None:
    server.queue(*[Error(429, "slow down", retry_after=2, retry_after_ms=2000)] * 3)

    with pytest.raises(openai.RateLimitError) as oe:
        ask_openai(server)
    assert oe.value.status_code == 429
    assert oe.value.response.headers["retry-after"] == "2"
    assert oe.value.response.headers["retry-after-ms"] == "2000"

    with pytest.raises(anthropic.RateLimitError) as ae:
        ask_anthropic(server)
    assert ae.value.response.headers["retry-after"] == "2"
    assert ae.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]

    with pytest.raises(genai_errors.ClientError) as ge:
        ask_gemini(server)
    assert ge.value.code == 429
    assert ge.value.status == "RESOURCE_EXHAUSTED"
    assert ge.value.response.headers["retry-after"] == "2"

    assert server.count() == 3  # no SDK retried behind our back


def test_server_errors(server: FakeLLMServer) -> None:
    server.queue(Error(500, "boom"), Error(529, "busy"), Error(503, "down"))
    with pytest.raises(openai.InternalServerError):
        ask_openai(server)
    with pytest.raises(anthropic.APIStatusError) as ae:
        ask_anthropic(server)
    assert ae.value.status_code == 529
    assert ae.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]
    with pytest.raises(genai_errors.ServerError) as ge:
        ask_gemini(server)
    assert (ge.value.code, ge.value.status) == (503, "UNAVAILABLE")


def test_max_prompt_chars(server: FakeLLMServer) -> None:
    server.max_prompt_chars = 10
    server.queue(Text("queued"))

    with pytest.raises(openai.BadRequestError) as oe:
        ask_openai(server, "x" * 11)
    assert oe.value.code == "context_length_exceeded"
    assert "maximum context length is 10" in oe.value.message

    with pytest.raises(anthropic.BadRequestError) as ae:
        ask_anthropic(server, "x" * 11)
    assert "prompt is too long: 11 tokens > 10 maximum" in str(ae.value)

    with pytest.raises(genai_errors.ClientError) as ge:
        ask_gemini(server, "x" * 11)
    assert (ge.value.code, ge.value.status) == (400, "INVALID_ARGUMENT")

    # A prompt at the limit passes and still gets the queued reply.
    assert ask_openai(server, "x" * 10).choices[0].message.content == "queued"


# -- scripting and bookkeeping ----------------------------------------------


def test_queues_and_responder(server: FakeLLMServer) -> None:
    server.responder = lambda r: Text(f"echo {r.prompt}")
    server.queue(Text("shared 1"), Text("shared 2"))
    server.queue(Text("for b"), model="model-b")

    assert ask_openai(server, model="model-b").choices[0].message.content == "for b"
    assert ask_openai(server, model="model-b").choices[0].message.content == "shared 1"
    assert ask_anthropic(server, model="model-a").content[0].text == "shared 2"  # type: ignore[union-attr]
    assert ask_openai(server, "hi", model="model-a").choices[0].message.content == "echo hi"

    assert server.count() == 4
    assert server.count(model="model-b") == 2
    assert server.count(api="anthropic") == 1
    assert server.count(model="model-a", api="openai") == 1
    times = [r.time for r in server.requests]
    assert times == sorted(times)

    server.reset()
    assert server.count() == 0
    assert ask_openai(server, "x").choices[0].message.content == "echo x"


def test_hang_triggers_client_timeout(server: FakeLLMServer) -> None:
    server.queue(Hang(30))
    with pytest.raises(openai.APITimeoutError):
        openai_client(server, timeout=0.3).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}]
        )
    # The server keeps serving others while one connection hangs.
    assert ask_openai(server).choices[0].message.content == "ok"


def test_latency_applied() -> None:
    with FakeLLMServer(latency=0.2) as srv:
        start = time.perf_counter()
        ask_openai(srv)
        assert time.perf_counter() - start >= 0.2


def test_default_benchmark_responder() -> None:
    def req(prompt: str) -> RecordedRequest:
        return RecordedRequest("openai", "/v1/chat/completions", {}, {}, "m", prompt, 0.0)

    judge = req('Grade this. Reply JSON: {"points_awarded": [..], "total": ..}')
    assert default_benchmark_responder(judge) == Text('{"points_awarded":[50],"total":50}')
    assert default_benchmark_responder(req("What is X?")) == Text("The answer is in the document.")
    assert default_benchmark_responder(req("Q"), reply_text="custom") == Text("custom")


# -- performance / robustness -----------------------------------------------


def test_concurrent_burst() -> None:
    n, latency = 200, 0.05

    async def burst(url: str) -> tuple[list[str | None], float]:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="test", max_retries=0)
        async with client:
            start = time.perf_counter()
            results = await asyncio.gather(
                *(
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"q{i}"}])
                    for i in range(n)
                )
            )
            return [r.choices[0].message.content for r in results], time.perf_counter() - start

    with FakeLLMServer(latency=latency) as srv:
        srv.responder = lambda r: Text("re " + r.prompt)
        contents, elapsed = asyncio.run(burst(srv.url))
        assert contents == [f"re q{i}" for i in range(n)]
        assert srv.count() == n
    assert elapsed < n * latency  # concurrent, not serialised (loose on purpose)


def _raw_post(conn: http.client.HTTPConnection, path: str, body: bytes, chunked: bool = False) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if chunked:
        conn.request("POST", path, body=iter([body[:7], body[7:]]), headers=headers, encode_chunked=True)
    else:
        conn.request("POST", path, body=body, headers=headers)
    resp = conn.getresponse()
    assert resp.getheader("Content-Type") == "application/json"
    return resp.status, json.loads(resp.read())


def test_raw_http_keepalive_chunked_large_and_404(server: FakeLLMServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    small = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    big_prompt = "y" * 12_000_000
    big = json.dumps({"model": "m", "messages": [{"role": "user", "content": big_prompt}]}).encode()

    # All on one keep-alive connection.
    assert _raw_post(conn, "/v1/chat/completions", small)[0] == 200
    assert _raw_post(conn, "/v1/chat/completions", small, chunked=True)[0] == 200
    start = time.perf_counter()
    status, body = _raw_post(conn, "/v1/messages", big)
    assert status == 200 and body["usage"]["input_tokens"] == 3_000_000
    assert time.perf_counter() - start < 5
    status, body = _raw_post(conn, "/nope", small)
    assert status == 404 and "error" in body
    status, body = _raw_post(conn, "/v1/chat/completions", b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    conn.close()

    assert [r.prompt for r in server.requests] == ["hi", "hi", big_prompt]


def test_cli_subprocess() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "tests.fakeserver", "--latency", "0.01", "--reply-text", "from cli"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line.startswith("READY http://127.0.0.1:")
            url = line.split(" ", 1)[1]
            with openai.OpenAI(base_url=url + "/v1", api_key="test", max_retries=0, timeout=10.0) as client:

                def ask(prompt: str) -> str | None:
                    resp = client.chat.completions.create(model="m", messages=[{"role": "user", "content": prompt}])
                    return resp.choices[0].message.content

                assert ask("question") == "from cli"
                judge = 'Score it. Reply JSON: {"points_awarded": [...]}'
                assert ask(judge) == '{"points_awarded":[50],"total":50}'
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0


# -- broken replies, at the HTTP level ---------------------------------------

API_PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/gemini-test:generateContent",
}


def request_body(api: str, prompt: str = "hi") -> bytes:
    if api == "gemini":
        return json.dumps({"contents": [{"role": "user", "parts": [{"text": prompt}]}]}).encode()
    return json.dumps({"model": f"{api}-test", "max_tokens": 64,
                       "messages": [{"role": "user", "content": prompt}]}).encode()


def post(srv: FakeLLMServer, api: str, prompt: str = "hi") -> http.client.HTTPResponse:
    """One request on its own connection; the caller reads (or fails to read) the body."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request("POST", API_PATHS[api], body=request_body(api, prompt),
                 headers={"Content-Type": "application/json"})
    return conn.getresponse()


# How each API's completion body starts (ids and timestamps follow).
REPLY_START = {"openai": b'{"id":"chatcmpl-', "anthropic": b'{"id":"msg_', "gemini": b'{"candidates":[{"content":'}


@pytest.mark.parametrize("api", API_PATHS)
def test_reset_closes_the_connection_mid_body(server: FakeLLMServer, api: str) -> None:
    server.queue(Reset())
    resp = post(server, api)
    assert resp.status == 200
    length = int(resp.getheader("Content-Length") or 0)
    with pytest.raises(http.client.IncompleteRead) as exc:
        resp.read()
    partial = exc.value.partial
    assert partial.startswith(REPLY_START[api]) and len(partial) == length // 2
    assert server.requests[0].response == partial
    # The server carries on with new connections.
    server.queue(Text("fine"))
    with post(server, api) as resp:
        assert json.loads(resp.read())


@pytest.mark.parametrize("api", API_PATHS)
def test_cutoff_is_a_complete_response_with_truncated_json(server: FakeLLMServer, api: str) -> None:
    server.queue(CutOff())
    with post(server, api) as resp:
        body = resp.read()   # no IncompleteRead: Content-Length matches what was sent
        assert resp.status == 200 and resp.getheader("Content-Type") == "application/json"
        assert int(resp.getheader("Content-Length") or 0) == len(body) > 0
    with pytest.raises(json.JSONDecodeError):
        json.loads(body)
    assert body.startswith(REPLY_START[api]) and server.requests[0].response == body


@pytest.mark.parametrize("api", API_PATHS)
def test_not_json_body_labelled_json(server: FakeLLMServer, api: str) -> None:
    server.queue(NotJson(), NotJson("Bad gateway"))
    for expected in (NotJson().body, "Bad gateway"):
        with post(server, api) as resp:
            assert resp.status == 200 and resp.getheader("Content-Type") == "application/json"
            assert resp.read().decode() == expected
    with pytest.raises(json.JSONDecodeError):
        json.loads(NotJson().body)


@pytest.mark.parametrize("api", API_PATHS)
def test_html_page_200(server: FakeLLMServer, api: str) -> None:
    server.queue(Html())
    with post(server, api) as resp:
        assert resp.status == 200
        assert (resp.getheader("Content-Type") or "").startswith("text/html")
        page = resp.read().decode()
    assert page.startswith("<!DOCTYPE html>") and "</html>" in page


@pytest.mark.parametrize("null", [False, True])
@pytest.mark.parametrize("api, field", [("openai", "choices"), ("anthropic", "content"), ("gemini", "candidates")])
def test_wrong_shape_lacks_the_answer_field(server: FakeLLMServer, api: str, field: str, null: bool) -> None:
    server.queue(WrongShape(null=null))
    with post(server, api) as resp:
        assert resp.status == 200
        body = json.loads(resp.read())
    assert isinstance(body, dict) and body   # well-formed JSON, API-looking
    assert (field in body) == null and body.get(field) is None
    if api == "openai":
        assert body["object"] == "chat.completion"
    elif api == "anthropic":
        assert body["type"] == "message"
    else:
        assert "usageMetadata" in body


def test_gemini_retry_delay_in_error_details(server: FakeLLMServer) -> None:
    server.queue(Error(429, "quota", retry_delay=1.5))
    with pytest.raises(genai_errors.ClientError) as ge:
        ask_gemini(server)
    assert ge.value.code == 429 and "retry-after" not in ge.value.response.headers
    details = ge.value.details["error"]["details"]
    retry_info = [d for d in details if d["@type"] == "type.googleapis.com/google.rpc.RetryInfo"]
    assert retry_info == [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]
    assert details[-1] == retry_info[0] and len(details) > 1   # found by type, not position

    # The other APIs have no such body field: their hint is a header.
    server.queue(Error(429, "slow", retry_delay=1.5))
    with pytest.raises(openai.RateLimitError) as oe:
        ask_openai(server)
    assert oe.value.body == {"message": "slow", "type": "invalid_request_error", "param": None, "code": None}


def test_anthropic_context_limit_wording(server: FakeLLMServer) -> None:
    server.max_prompt_chars = 10
    server.context_style = "exceed_limit"
    with pytest.raises(anthropic.BadRequestError) as ae:
        ask_anthropic(server, "x" * 11)
    assert "input length and `max_tokens` exceed context limit: 11 + 64 > 10" in str(ae.value)
    # The other APIs keep their one wording.
    with pytest.raises(openai.BadRequestError) as oe:
        ask_openai(server, "x" * 11)
    assert oe.value.code == "context_length_exceeded"


# -- the random-fault mode ------------------------------------------------------


def outcome_of(srv: FakeLLMServer, api: str, prompt: str) -> str:
    """What a client saw: the status and whether the body was a whole JSON object."""
    resp = post(srv, api, prompt)
    try:
        body = resp.read()
    except http.client.IncompleteRead:
        return f"{resp.status} incomplete"
    finally:
        resp.close()
    try:
        kind = "json" if isinstance(json.loads(body), dict) else "other"
    except ValueError:
        kind = "not-json"
    return f"{resp.status} {kind}"


def drive(srv: FakeLLMServer, n: int) -> list[str]:
    return [outcome_of(srv, ("openai", "anthropic", "gemini")[i % 3], f"q{i}") for i in range(n)]


def test_random_faults_are_seeded_counted_and_cover_every_kind() -> None:
    def faulty() -> FakeLLMServer:
        return FakeLLMServer(fault_rate=0.5, fault_seed=7, timeout_hang=0.01)

    with faulty() as first:
        seen = drive(first, 120)
        stats = first.stats()
    with faulty() as second:
        assert drive(second, 120) == seen   # same seed, same requests: same faults
        assert second.stats() == stats

    faults, successes = stats["faults"], stats["successes"]
    assert set(faults) == set(FAULT_KINDS)   # every kind drawn at least once in 120
    assert sum(faults.values()) + sum(successes.values()) == 120
    assert 30 < sum(faults.values()) < 90
    assert sum(1 for s in seen if s == "200 json") >= sum(successes.values())
    assert "200 incomplete" in seen and "200 not-json" in seen and "429 json" in seen
    # Each request had its own prompt: one identity each, counted once.
    by_identity = stats["faults_by_identity"]
    assert sum(sum(k.values()) for k in by_identity.values()) == sum(faults.values())
    assert set(successes.values()) == {1} and not set(successes) & set(by_identity)


def test_queued_replies_are_never_faulted() -> None:
    with FakeLLMServer(fault_rate=1.0, fault_kinds=["500"]) as srv:
        srv.queue(Text("scripted"))
        assert ask_openai(srv).choices[0].message.content == "scripted"
        with pytest.raises(openai.InternalServerError):
            ask_openai(srv)
        assert srv.fault_counts == {"500": 1}


def test_success_counts_by_identity() -> None:
    with FakeLLMServer() as srv:
        ask_openai(srv, "same", model="m1")
        ask_openai(srv, "same", model="m1")
        ask_openai(srv, "same", model="m2")
        ask_anthropic(srv, "same", model="m1")
        srv.queue(Error(503), Hang(0.01))   # neither is a success
        for _ in range(2):
            with contextlib.suppress(openai.InternalServerError):
                ask_openai(srv, "other", model="m1")
        assert srv.success_counts == {
            request_identity("openai", "m1", "same"): 2,
            request_identity("openai", "m2", "same"): 1,
            request_identity("anthropic", "m1", "same"): 1,
        }
        assert srv.fault_counts == {}   # scripted replies are not injected faults
        srv.reset()
        assert srv.success_counts == {} and srv.stats()["successes"] == {}


def test_stats_endpoint_matches_the_counters() -> None:
    with FakeLLMServer(fault_rate=1.0, fault_kinds=["503", "html"], fault_seed=1) as srv:
        drive(srv, 6)
        srv.queue(Text("ok"))
        ask_gemini(srv)
        with urllib.request.urlopen(srv.url + "/_stats", timeout=10) as resp:
            stats = json.loads(resp.read())
        assert stats == srv.stats()
        assert sum(stats["faults"].values()) == 6 and set(stats["faults"]) <= {"503", "html"}
        assert stats["successes"] == {request_identity("gemini", "gemini-2.5-flash", "hello"): 1}
        assert (stats["fault_rate"], stats["fault_seed"], stats["fault_kinds"]) == (1.0, 1, ["503", "html"])


def test_bad_fault_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault kind"):
        FakeLLMServer(fault_kinds=["500", "teapot"])
    with pytest.raises(ValueError, match="fault_rate"):
        FakeLLMServer(fault_rate=1.5)


def test_cli_fault_flags() -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "tests.fakeserver", "--fault-rate", "1", "--fault-kinds", "529,hang",
         "--fault-seed", "3", "--timeout-hang", "0.01"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    ) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().strip().split(" ", 1)[1]
            port = int(url.rsplit(":", 1)[1])
            srv = FakeLLMServer()   # only to address the subprocess with the helpers above
            srv.port = port
            seen = drive(srv, 8)
            assert set(seen) <= {"529 json", "200 json"}   # a 0.01 s hang answers late
            with urllib.request.urlopen(url + "/_stats", timeout=10) as resp:
                stats = json.loads(resp.read())
            assert sum(stats["faults"].values()) == 8 and set(stats["faults"]) <= {"529", "hang"}
            assert stats["faults"].get("529", 0) == seen.count("529 json")
            assert stats["successes"] == {}
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
    bad = subprocess.run([sys.executable, "-m", "tests.fakeserver", "--fault-kinds", "nope"],
                         cwd=REPO_ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert bad.returncode == 2 and "unknown fault kind" in bad.stderr


def test_an_answer_to_a_client_that_left_is_not_a_success() -> None:
    """A client that timed out or was killed closed its end before the answer went out:
    only the answer to the client still waiting counts."""
    with FakeLLMServer(latency=0.3) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as gone:
            body = request_body("openai", "abandoned")
            gone.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        # Answered after the abandoned request's wait ended (both wait `latency` on one loop).
        assert outcome_of(srv, "openai", "waited") == "200 json"
        assert srv.count() == 2
        assert srv.success_counts == {request_identity("openai", "openai-test", "waited"): 1}
