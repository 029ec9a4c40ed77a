"""Streaming as transport, through the three official SDKs against the fake
server's own streams: which requests stream, that a streamed reply is the same completion,
how each way a stream breaks is classified and retried, and evalnb's own limits."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from evalnb.config import EndpointConfig
from evalnb.providers import make_provider
from evalnb.providers.base import ChatRequest, Usage
from evalnb.providers.retry import RetryPolicy
from tests.conftest import FAST_RETRY
from tests.fakeserver import (Empty, Error, FakeLLMServer, Hang, MalformedEvent, Refusal, StreamCut, StreamStall,
                              Text)
from tests.test_providers import outcome, tokens

SDKS = ("openai", "anthropic", "gemini")
POLICY = RetryPolicy(**FAST_RETRY)
STREAM_KEYS = ("stream", "stream_options")   # the only difference a streamed request's body may show


def endpoint(sdk: str, server: FakeLLMServer, **extra) -> EndpointConfig:
    base = f"{server.url}/v1" if sdk == "openai" else server.url
    return EndpointConfig(provider=sdk, name=f"{sdk}-model", base_url=base, concurrency=1,
                          **({"timeout": 5.0} | extra))




# --- which requests stream ----------------------------------------------------------------------

@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("settings, budget, streams", [
    ({}, 8192, False), ({}, 16384, False), ({}, 16385, True), ({}, 32768, True),   # auto: above 16,384
    ({"reasoning": True}, 8192, True),                                              # auto: a reasoning model
    ({"stream": False}, 32768, False), ({"stream": False, "reasoning": True}, 8192, False),
    ({"stream": True}, 100, True),
])
def test_the_auto_rule_read_from_the_servers_log(server: FakeLLMServer, sdk: str, settings: dict,
                                                 budget: int, streams: bool) -> None:
    result = outcome(endpoint(sdk, server, **settings), ChatRequest("hello world", budget, 0.1))
    assert result.completion.text == "ok" and result.completion.streamed == streams
    (request,) = server.requests
    assert request.streamed == streams
    if sdk == "openai" and streams:
        assert request.body["stream"] is True and request.body["stream_options"] == {"include_usage": True}
    if sdk == "gemini":
        assert request.path.endswith(":streamGenerateContent" if streams else ":generateContent")


@pytest.mark.parametrize("sdk", SDKS)
def test_a_streamed_request_sends_the_same_body_plus_the_streaming_flag(server: FakeLLMServer, sdk: str) -> None:
    request = ChatRequest("the same prompt", 32768, 0.1, system="a system prompt",
                          json_schema={"type": "object", "properties": {"total": {"type": "number"}}})
    outcome(endpoint(sdk, server, stream=False), request)
    outcome(endpoint(sdk, server, stream=True), request)
    plain, streamed = server.requests
    assert (plain.streamed, streamed.streamed) == (False, True)
    assert {k: v for k, v in streamed.body.items() if k not in STREAM_KEYS} == plain.body


def test_a_batch_request_never_streams(server: FakeLLMServer) -> None:
    """A batch line is built from the live provider's request body, which carries no flag."""
    from evalnb.execution.batch.backends import backend_for

    for sdk in ("openai", "anthropic"):
        live = make_provider(endpoint(sdk, server, reasoning=True, stream=True, mode="batch"))
        line = backend_for(sdk, live).line("c1", ChatRequest("a long reasoning task", 32768, None))
        body = line["body"] if sdk == "openai" else line["params"]
        assert not set(body) & set(STREAM_KEYS), body
        asyncio.run(live.aclose())


# --- the same completion either way ------------------------------------------------------------------

REPLIES = {
    "text": Text("The answer is in the second paragraph of the document, near the end."),
    "reasoning": Text("Paris.", reasoning="The question asks for a capital; the document names Paris twice."),
    "refusal": Refusal("I can't help with that."),
    "empty": Empty(),
    "length": Text("A long answer that ran out of budget", finish="length"),
    "length while reasoning": Text("", reasoning="Let me think about every clause in turn " * 6, finish="length"),
    "inline think": Text("<think>first the facts</think>The answer."),
}
FINISH = {"openai": {"stop": "stop", "length": "length", "refused": "content_filter"},
          "anthropic": {"stop": "end_turn", "length": "max_tokens", "refused": "refusal"},
          "gemini": {"stop": "STOP", "length": "MAX_TOKENS", "refused": "SAFETY"}}


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("name", REPLIES)
def test_a_streamed_reply_is_the_same_completion(server: FakeLLMServer, sdk: str, name: str) -> None:
    reply = REPLIES[name]
    server.queue(reply, reply)
    request = ChatRequest("hello world", 64, 0.1)
    plain = outcome(endpoint(sdk, server, stream=False), request).completion
    streamed = outcome(endpoint(sdk, server, stream=True), request).completion
    assert [r.streamed for r in server.requests] == [False, True]
    assert replace(streamed, latency=None, streamed=False, request_id=None) == \
        replace(plain, latency=None, request_id=None)
    assert streamed.request_id and plain.request_id and streamed.request_id != plain.request_id
    # ... and what that completion is, read off the reply independently of evalnb
    text = reply.text if isinstance(reply, Text) else ""
    reasoning = reply.reasoning if isinstance(reply, Text) else ""
    status = "refused" if name == "refusal" else "ok" if text.strip() else "empty"
    assert (streamed.text, streamed.status, streamed.reasoning) == (text, status, reasoning or None)
    kind = "refused" if name == "refusal" else "length" if name.startswith("length") else "stop"
    assert streamed.finish_reason == FINISH[sdk][kind]
    if name != "refusal" or sdk == "openai":   # openai counts the refusal's text as output
        out = tokens(text or (reply.message if isinstance(reply, Refusal) else "")) + tokens(reasoning)
        share = tokens(reasoning) if reasoning and sdk != "anthropic" else None   # Anthropic reports no share
        assert streamed.usage == Usage(tokens("hello world"), out, share)
    assert streamed.think_block == ("kept" if name == "inline think" else None)


# --- each way a stream breaks ------------------------------------------------------------------------

SECRET_TEXT = "Zanzibar-quartz-17 is the hidden answer"


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("fault, why", [
    (StreamCut(SECRET_TEXT * 4, 0.5), "stream broke"),
    (StreamStall(SECRET_TEXT * 4, 0.5, seconds=30), "no event within stream_idle_timeout (0.5 s)"),
    (MalformedEvent(SECRET_TEXT * 4, 0.5), "malformed reply"),
])
def test_a_stream_broken_part_way_is_retried_with_what_had_arrived(server: FakeLLMServer, sdk: str, fault,
                                                                    why: str) -> None:
    server.queue(fault, Text("whole at last"))
    result = outcome(endpoint(sdk, server, stream=True, stream_idle_timeout=0.5), ChatRequest("q", 64, 0.1))
    assert result.completion.text == "whole at last" and result.completion.status == "ok"
    assert result.attempts == 2 == server.count()
    (error,) = result.retried_errors
    assert why in error and "characters in" in error and "events received" in error
    assert "Zanzibar" not in error.split("body starts")[0]   # its length, not its text
    received = int(error.rsplit("; ", 1)[1].split(" characters")[0].replace(",", ""))
    assert 0 < received < len(fault.text)


@pytest.mark.parametrize("sdk", SDKS)
def test_a_stream_failing_every_attempt_is_transient_with_its_error(server: FakeLLMServer, sdk: str) -> None:
    server.queue(StreamCut(), StreamCut())
    result = outcome(endpoint(sdk, server, stream=True), ChatRequest("q", 64, 0.1),
                     RetryPolicy(max_retries=1, base_delay=0.01, max_delay=0.02))
    assert result.completion is None and result.error.kind == "transient" and result.attempts == 2
    assert result.error.message.startswith("stream broke") and len(result.retried_errors) == 1


@pytest.mark.parametrize("sdk", SDKS)
def test_refusal_and_a_length_stop_in_a_stream_are_answers_not_failures(server: FakeLLMServer, sdk: str) -> None:
    server.queue(Refusal(), Text("", reasoning="thinking and thinking " * 10, finish="length"))
    request = ChatRequest("q", 64, 0.1)
    refused = outcome(endpoint(sdk, server, stream=True), request)
    ran_out = outcome(endpoint(sdk, server, stream=True), request)
    assert (refused.completion.status, refused.attempts) == ("refused", 1)
    assert (ran_out.completion.status, ran_out.attempts) == ("empty", 1)
    assert ran_out.completion.finish_reason == FINISH[sdk]["length"] and ran_out.completion.reasoning
    assert server.count() == 2


@pytest.mark.parametrize("sdk", SDKS)
def test_an_error_before_the_stream_is_classified_as_without_one(server: FakeLLMServer, sdk: str) -> None:
    server.queue(Error(503, "busy"), Error(400, "bad request"))
    result = outcome(endpoint(sdk, server, stream=True), ChatRequest("q", 64, 0.1))
    assert result.attempts == 2 and result.error.kind == "permanent" and result.error.status_code == 400
    assert "HTTP 503" in result.retried_errors[0]


# --- evalnb's own limits -----------------------------------------------------------------------------

@pytest.mark.parametrize("sdk", SDKS)
def test_timeout_bounds_the_wait_for_the_first_event(server: FakeLLMServer, sdk: str) -> None:
    server.queue(Hang(30), Text("prompt"))
    result = outcome(endpoint(sdk, server, stream=True, timeout=0.5), ChatRequest("q", 64, 0.1))
    assert result.completion.text == "prompt" and result.attempts == 2
    assert "no first event within timeout (0.5 s)" in result.retried_errors[0]


@pytest.mark.parametrize("sdk", SDKS)
def test_max_call_seconds_ends_an_attempt_whose_events_keep_coming(server: FakeLLMServer, sdk: str) -> None:
    server.token_rate = 40   # 4 tokens an event: an event every 0.1 s, 400 characters in 2.5 s
    server.queue(Text("x" * 400))
    result = outcome(endpoint(sdk, server, stream=True, stream_idle_timeout=1.0, max_call_seconds=1.0),
                     ChatRequest("q", 64, 0.1), RetryPolicy(max_retries=0))
    assert result.completion is None and result.error.kind == "transient"
    assert "max_call_seconds (1 s) passed" in result.error.message
    assert "stream_idle_timeout" not in result.error.message


@pytest.mark.parametrize("sdk", SDKS)
def test_a_stream_longer_than_timeout_succeeds_while_events_flow(server: FakeLLMServer, sdk: str) -> None:
    """``timeout`` is the wait for the first event, not a total (google-genai's aiohttp
    transport would make it one): a 2.5 s stream under a 1 s timeout comes whole."""
    server.token_rate = 40
    server.queue(Text("y" * 400))
    result = outcome(endpoint(sdk, server, stream=True, timeout=1.0, stream_idle_timeout=1.0),
                     ChatRequest("q", 64, 0.1), RetryPolicy(max_retries=0))
    assert result.completion is not None and result.completion.text == "y" * 400
    assert result.completion.latency.total_s > 2.0


@pytest.mark.parametrize("sdk", SDKS)
def test_a_gateway_drops_a_long_silent_generation_that_streaming_survives(server: FakeLLMServer, sdk: str) -> None:
    """Like a proxy with a 1 s idle limit in front of a model that takes 2.5 s: without
    streaming nothing is sent until the end, so every attempt gets the gateway's 504."""
    server.token_rate, server.gateway_timeout = 40, 1.0
    answer = "z" * 400
    server.responder = lambda request: Text(answer)
    policy = RetryPolicy(max_retries=1, base_delay=0.01, max_delay=0.02)
    silent = outcome(endpoint(sdk, server, stream=False), ChatRequest("q", 64, 0.1), policy)
    assert silent.completion is None and silent.error.kind == "transient" and silent.error.status_code == 504
    assert silent.attempts == 2
    streamed = outcome(endpoint(sdk, server, stream=True), ChatRequest("q", 64, 0.1), policy)
    assert streamed.completion.text == answer and streamed.attempts == 1


def test_server_sent_events_are_split_whatever_the_reads() -> None:
    """Events split across reads, CRLF line ends (a CR and its LF in two reads), multi-line
    data, comments and other fields: the data of each whole event, in order."""
    from evalnb.providers.streams.base import EventSplitter

    wire = (b': a comment\r\nevent: x\r\ndata: {"a": 1}\r\n\r\ndata: first line\ndata:second\n\n'
            b"id: 7\ndata: [DONE]\n\n")
    for size in (1, 2, 3, 7, len(wire)):
        splitter = EventSplitter()
        found = [d for i in range(0, len(wire), size) for d in splitter.feed(wire[i:i + size])]
        assert found == [b'{"a": 1}', b"first line\nsecond", b"[DONE]"], size
        assert splitter.end() == []
    tail = EventSplitter()
    assert tail.feed(b"data: cut off without its blank line") == [] and tail.end() == [b"cut off without its blank line"]


ERROR_EVENTS = {   # how each API reports a failure inside a 200 stream, and what the record says
    "openai": (b'data: {"error": {"message": "upstream overloaded", "type": "server_error"}}\n\n',
               "error event: upstream overloaded"),
    "anthropic": (b'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                  b'"message": "Overloaded"}}\n\n', "HTTP 529: error event overloaded_error: Overloaded"),
}


@pytest.mark.parametrize("sdk", ERROR_EVENTS)
def test_an_error_event_part_way_is_transient(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch,
                                              sdk: str) -> None:
    """The first stream breaks off with the API's error event after two events; the retry
    comes whole."""
    import tests.fakeserver as fakeserver
    from tests.fakestream import Event

    render, streams = fakeserver.STREAM_RENDERERS[sdk], []
    wire, says = ERROR_EVENTS[sdk]

    def first_broken(*args) -> list[Event]:
        events = render(*args)
        streams.append(events)
        return events if len(streams) > 1 else events[:2] + [Event(wire)]
    monkeypatch.setitem(fakeserver.STREAM_RENDERERS, sdk, first_broken)
    server.queue(Text("the first half, then the upstream gave out"), Text("whole"))
    result = outcome(endpoint(sdk, server, stream=True), ChatRequest("q", 64, 0.1))
    assert result.attempts == 2 and says in result.retried_errors[0], result.retried_errors
    assert result.completion.text == "whole"
