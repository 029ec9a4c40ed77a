"""What real OpenAI-compatible servers do that the fakes did not, through the
official SDKs against the fake server: a stream that never reports usage (llama.cpp's
server ignores ``stream_options.include_usage``), and an error inside a 200 stream,
classified by the rules of the HTTP status it stands for."""

from __future__ import annotations


import pytest

import tests.fakeserver as fakeserver
from evalnb.core.tokens import CHARS_PER_TOKEN
from evalnb.providers.base import ChatRequest
from evalnb.execution.runner import usage_fields
from tests.fakeserver import FakeLLMServer, Text
from tests.fakestream import Event
from tests.test_streaming import POLICY, endpoint
from tests.test_providers import outcome

PROMPT = "Summarise the harbour records of 1904 in one line. " * 20
ANSWER = "The harbour saw eleven ships and one storm."


def without_usage(monkeypatch: pytest.MonkeyPatch, sdk: str) -> None:
    """The server's streams carry no usage at all, whatever the request asks."""
    render = fakeserver.STREAM_RENDERERS[sdk]

    def no_usage(script, model, n, prompt_tokens, usage, size):   # type: ignore[no-untyped-def]
        return render(script, model, n, prompt_tokens, False, size)
    monkeypatch.setitem(fakeserver.STREAM_RENDERERS, "openai", no_usage)


def test_a_stream_without_usage_is_counted_at_an_estimate_never_zero(server: FakeLLMServer,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    without_usage(monkeypatch, "openai")
    server.queue(Text(ANSWER))
    result = outcome(endpoint("openai", server, stream=True), ChatRequest(PROMPT, 64, 0.1))
    (request,) = server.requests
    assert request.body["stream_options"] == {"include_usage": True}   # asked for, as the SDK can
    usage = result.completion.usage
    assert usage is not None and usage.estimated
    # the estimate is the protocol's characters-per-token figure of the texts (English here)
    assert usage.input_tokens == round(len(PROMPT) / CHARS_PER_TOKEN["en"])
    assert usage.output_tokens == round(len(ANSWER) / CHARS_PER_TOKEN["en"])
    assert usage_fields(usage)["estimated"] is True


def test_a_reported_usage_is_kept_and_not_marked(server: FakeLLMServer) -> None:
    server.queue(Text(ANSWER))
    result = outcome(endpoint("openai", server, stream=True), ChatRequest(PROMPT, 64, 0.1))
    assert result.completion.usage is not None and not result.completion.usage.estimated
    assert "estimated" not in usage_fields(result.completion.usage)   # old records read as they did


OVERFLOW = b'data: {"error": {"message": "Requested tokens (16997) exceed context window of 4096", ' \
           b'"type": "invalid_request_error", "code": 400}}\n\n'


@pytest.mark.parametrize("wire, kind, status, says", [
    (OVERFLOW, "permanent", 400, "exceed context window of 4096"),
    # a context overflow named only in the message (no type, no code) is the same error
    (b'data: {"error": {"message": "This model\'s maximum context length is 4096 tokens"}}\n\n',
     "permanent", 400, "maximum context length is 4096"),
    (b'data: {"error": {"message": "rate limited", "type": "rate_limit_error"}}\n\n', "transient", 429, "rate limited"),
    (b'data: {"error": {"message": "something odd"}}\n\n', "transient", None, "something odd"),
])
def test_an_error_inside_an_openai_stream_is_classified_like_its_http_status(
        server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch, wire: bytes, kind: str, status: int | None,
        says: str) -> None:
    render = fakeserver.STREAM_RENDERERS["openai"]

    def broken(*args):   # type: ignore[no-untyped-def]
        return render(*args)[:1] + [Event(wire)]   # the role chunk, then the error: no finish_reason
    monkeypatch.setitem(fakeserver.STREAM_RENDERERS, "openai", broken)
    server.queue(*[Text("never whole")] * 3)
    result = outcome(endpoint("openai", server, stream=True), ChatRequest("q", 64, 0.1))
    assert result.completion is None and result.error.kind == kind
    assert result.error.status_code == status and says in result.error.message   # the server's words kept
    assert "ended before its finish_reason" not in result.error.message
    assert result.attempts == (1 if kind == "permanent" else POLICY.max_retries + 1)


def test_gemini_error_chunk_in_a_stream_is_classified(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    render = fakeserver.STREAM_RENDERERS["gemini"]
    wire = (b'data: {"error": {"code": 400, "message": "The input token count (9000) exceeds the maximum '
            b'number of tokens allowed (4096).", "status": "INVALID_ARGUMENT"}}\n\n')

    def broken(*args):   # type: ignore[no-untyped-def]
        return render(*args)[:1] + [Event(wire)]
    monkeypatch.setitem(fakeserver.STREAM_RENDERERS, "gemini", broken)
    server.queue(*[Text("never whole")] * 3)
    result = outcome(endpoint("gemini", server, stream=True), ChatRequest("q", 64, 0.1))
    assert result.completion is None and result.error.kind == "permanent", result.error
    assert "exceeds the maximum number of tokens" in result.error.message


def test_a_ceiling_stops_a_run_whose_streams_report_no_usage(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Such calls were once counted at $0 and the ceiling never stopped the run. The
    expected spend is computed here from what the server received and sent, by the protocol's
    characters-per-token figures; then a ceiling at half that spend stops a second run."""
    import json
    import evalnb
    from tests.conftest import deterministic_responder, openai_params
    from tests.test_budget import PRICE, priced, is_cjk

    without_usage(monkeypatch, "openai")

    def tokens(text: str) -> int:
        return round(len(text) / (CHARS_PER_TOKEN["cjk"] if is_cjk(text) else CHARS_PER_TOKEN["en"]))

    def run_under(ceiling: float, folder: str) -> tuple[dict, list]:
        with FakeLLMServer() as server:
            server.responder = deterministic_responder
            params = priced(openai_params(tmp_path / folder, server.url, concurrency=1), ceiling)
            for endpoint_params in (params["model"], *params["judges"]):
                endpoint_params["stream"] = True
            run = evalnb.open_run(params)
            for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
                stage(run)
            run.close()
            return json.loads(run.path("scores.json").read_text()), list(server.requests)

    scores, sent = run_under(100.0, "whole")
    expected = sum(tokens(r.prompt) + tokens(deterministic_responder(r).text) for r in sent) * PRICE / 1e6
    assert scores["budget"]["ceilings"][0]["spent_usd"] == pytest.approx(expected) and expected > 0
    generated = scores["usage"]["generate"]["contestant-x"]
    assert generated["estimated_usage_calls"] == generated["calls"] and generated["input_tokens"] > 0

    stopped, _ = run_under(expected / 2, "bounded")
    assert stopped["budget"]["ceilings"][0]["stopped"], "the ceiling stopped the run"
    assert stopped["budget"]["ceilings"][0]["spent_usd"] <= expected / 2


TIMINGS = {"prompt_n": 40, "prompt_ms": 812.5, "predicted_n": 12, "predicted_ms": 1187.5}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_server_own_timings_are_recorded_beside_the_client_total(server: FakeLLMServer,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  stream: bool) -> None:
    """llama.cpp's server adds ``timings`` to a reply (its last event when streamed): the
    seconds it spent, apart from the queue in front of it that the client's total includes."""
    import json as _json
    if stream:
        render = fakeserver.STREAM_RENDERERS["openai"]

        def with_timings(*args):   # type: ignore[no-untyped-def]
            events = render(*args)
            last = _json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [], "timings": TIMINGS})
            return events[:-1] + [Event(f"data: {last}\n\n".encode()), events[-1]]   # before [DONE]
        monkeypatch.setitem(fakeserver.STREAM_RENDERERS, "openai", with_timings)
    else:
        plain = fakeserver._RENDERERS["openai"]

        def with_body_timings(*args):   # type: ignore[no-untyped-def]
            status, headers, body = plain(*args)
            return status, headers, body | {"timings": TIMINGS}
        monkeypatch.setitem(fakeserver._RENDERERS, "openai", with_body_timings)
    server.latency = 0.3   # the client waits longer than the server says it worked
    server.queue(Text(ANSWER))
    result = outcome(endpoint("openai", server, stream=stream), ChatRequest("q", 64, 0.1))
    latency = result.completion.latency
    assert latency.server_s == pytest.approx((812.5 + 1187.5) / 1000)
    assert result.completion.raw["server_timings"] == TIMINGS
    assert latency.total_s >= 0.3


def test_a_stream_that_says_nothing_is_asked_once_more_without_streaming(server: FakeLLMServer,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp's server answers a streamed request whose prompt overflows its window with a
    200 and no event at all (the error goes to its log). The same request sent whole gets the
    400 that says why: a permanent context-length failure with the server's message, not a
    transient "stream ended" retried on every rerun."""
    from tests.fakeserver import Error
    monkeypatch.setitem(fakeserver.STREAM_RENDERERS, "openai", lambda *args: [])
    server.queue(Text("streamed: nothing of it is sent"),
                 Error(400, "Requested tokens (5010) exceed context window of 2048", code="context_length_exceeded"))
    result = outcome(endpoint("openai", server, stream=True), ChatRequest("x" * 500, 64, 0.1))
    assert result.completion is None and result.error.kind == "permanent" and result.error.status_code == 400
    assert "exceed context window of 2048" in result.error.message and result.attempts == 1
    assert [r.streamed for r in server.requests] == [True, False]
    # an empty stream from a server that then answers: the answer, sent whole
    server.reset()
    server.queue(Text("streamed: nothing of it is sent"), Text(ANSWER))
    result = outcome(endpoint("openai", server, stream=True), ChatRequest("q", 64, 0.1))
    assert result.completion.text == ANSWER and not result.completion.streamed


def test_an_offline_baseline_uses_no_tokens(tmp_path) -> None:
    """The offline baselines make no model call: no usage, estimated or otherwise."""
    import json
    import evalnb
    from tests.conftest import offline_params
    run = evalnb.open_run(offline_params(tmp_path))
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
        stage(run)
    run.close()
    for stage in ("generate", "judge"):
        lines = (run.dir / f"{stage}.jsonl").read_text().splitlines()
        assert all(json.loads(line).get("usage") is None for line in lines)
