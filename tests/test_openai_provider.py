"""The OpenAI-compatible provider: the real ``openai`` SDK against the local server.

Covers the WildTrace protocol's §2 request settings, the response statuses and the one retry
policy (SDK retries off: the server sees exactly the attempts the runner counted).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

import evalnb
from evalnb.providers.base import ChatRequest
from evalnb.providers.openai_compat import OpenAIProvider
from evalnb.providers.retry import RetryPolicy, call_with_retries
from tests.conftest import FAST_RETRY, SAMPLE, deterministic_responder, openai_params, sample_tasks
from tests.fakeserver import Empty, Error, FakeLLMServer, Hang, Refusal, RecordedRequest, Text

SPEC_ANSWER = ("Answer using ONLY the document below. Include every specific detail from the text."
               "\n\nQuestion: {q}\n\nDocument:\n{d}")


def expected_prompt(task: dict) -> str:
    document = (SAMPLE / "corpus" / task["corpus_file"]).read_bytes().decode("utf-8")
    return SPEC_ANSWER.replace("{q}", task["question_text"], 1).replace("{d}", document, 1)


def by_task(script: dict[str, list]) -> Callable[[RecordedRequest], object]:
    """Scripted replies per task (matched on the question), else deterministic answers."""
    questions = {t["task_id"]: t["question_text"] for t in sample_tasks()}

    def respond(request: RecordedRequest) -> object:
        for task_id, replies in script.items():
            if not request.prompt.startswith("STRICT") and f"Question: {questions[task_id]}\n" in request.prompt:
                return replies.pop(0) if len(replies) > 1 else replies[0]
        return deterministic_responder(request)
    return respond


def generation_requests(server: FakeLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.model == "contestant-x"]


def run_stages(params: dict, *stages: str) -> evalnb.Run:
    run = evalnb.open_run(params)
    for stage in stages:
        getattr(evalnb, stage)(run)
    return run


def test_generation_request_is_one_user_turn_with_protocol_settings(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = deterministic_responder
    run_stages(openai_params(tmp_path, server.url), "generate")
    tasks = {t["task_id"]: t for t in sample_tasks()}
    sent = {r.prompt: r for r in generation_requests(server)}
    # wt-sample-10's document is longer than the 50,000-character cap: never sent.
    assert len(sent) == 11
    for task_id, task in tasks.items():
        prompt = expected_prompt(task)
        if task_id == "wt-sample-10":
            assert prompt not in sent
            continue
        body = sent[prompt].body
        assert body["messages"] == [{"role": "user", "content": prompt}]
        assert body["temperature"] == 0.1 and body["max_tokens"] == 8192
        assert set(body) == {"model", "messages", "temperature", "max_tokens"}


def test_reasoning_budget_and_omitted_temperature(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = deterministic_responder
    params = openai_params(tmp_path, server.url)
    params["model"].update(reasoning=True, send_temperature=False, token_param="max_completion_tokens")
    run_stages(params, "generate")
    for request in generation_requests(server):
        assert "temperature" not in request.body and "max_tokens" not in request.body
        assert request.body["max_completion_tokens"] == 32768


def test_judge_requests_use_judge_settings(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = deterministic_responder
    params = openai_params(tmp_path, server.url)
    params["judges"][2]["send_temperature"] = False
    run_stages(params, "generate", "judge")
    judged = [r for r in server.requests if r.model.startswith("judge-")]
    assert len(judged) == 11 * 3
    for request in judged:
        assert request.body["max_tokens"] == 16384
        assert request.body["messages"][0]["role"] == "user" and len(request.body["messages"]) == 1
        assert request.prompt.startswith("STRICT grader.")
        assert ("temperature" in request.body) == (request.model != "judge-3")


def test_statuses_and_attempts(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = by_task({
        "wt-sample-01": [Refusal()],
        "wt-sample-02": [Empty()],
        "wt-sample-03": [Error(400, "bad request", code="invalid_request_error")],
        "wt-sample-04": [Error(500, "boom")] * 6 + [Text("never reached")],
        "wt-sample-05": [Error(503), Error(429, retry_after=0.05), Text("fine at last")],
        "wt-sample-06": [Text("   \n")],
        # (insufficient_quota is the endpoint's, not the item's, tests/test_endpoint_failures.py)
        "wt-sample-07": [Error(413, "request too large")],
    })
    run = run_stages(openai_params(tmp_path, server.url), "generate")
    records = {r["task_id"]: r for r in json.loads(run.path("responses.json").read_text())["records"]}
    expect = {"wt-sample-01": ("refused", 1), "wt-sample-02": ("empty", 1),
              "wt-sample-03": ("failed_permanent", 1), "wt-sample-04": ("failed_transient", 6),
              "wt-sample-05": ("ok", 3), "wt-sample-06": ("empty", 1),
              "wt-sample-07": ("failed_permanent", 1), "wt-sample-10": ("out_of_context", 0),
              "wt-sample-12": ("ok", 1)}
    for task_id, (status, attempts) in expect.items():
        assert (records[task_id]["status"], records[task_id]["attempts"]) == (status, attempts), task_id
    # The server saw exactly the attempts the runner counted: SDK retries are off.
    sent = sum(r["attempts"] for r in records.values())
    assert len(generation_requests(server)) == sent
    assert records["wt-sample-05"]["waits"][1] == pytest.approx(0.05)   # Retry-After honoured
    assert records["wt-sample-03"]["error"]["status_code"] == 400
    assert records["wt-sample-04"]["error"]["kind"] == "transient"
    assert records["wt-sample-10"]["route"] == {"in_scope": False, "cap": 50000, "cap_kind": "en",
                                                "doc_chars": 70632, "status": "out_of_context"}
    assert records["wt-sample-12"]["usage"]["input_tokens"] > 0
    assert records["wt-sample-12"]["model_route"] == "contestant-x"


def provider(server: FakeLLMServer, timeout: float = 5.0) -> OpenAIProvider:
    return OpenAIProvider("m", base_url=f"{server.url}/v1", api_key_env=None, concurrency=1,
                          timeout=timeout)


def call(server: FakeLLMServer, policy: RetryPolicy, timeout: float = 5.0):
    async def go():
        p = provider(server, timeout)
        try:
            return await call_with_retries(p, ChatRequest("hi", 10, 0.1), policy, random.Random(0))
        finally:
            await p.aclose()
    return asyncio.run(go())


def test_retry_after_is_capped(server: FakeLLMServer) -> None:
    server.queue(Error(429, retry_after=100), Text("ok"))
    outcome = call(server, RetryPolicy(**FAST_RETRY))
    assert outcome.completion.text == "ok" and outcome.waits == [FAST_RETRY["retry_after_cap"]]


def test_retry_after_ms_header_is_read(server: FakeLLMServer) -> None:
    server.queue(Error(503, retry_after_ms=120), Text("ok"))
    assert call(server, RetryPolicy(**FAST_RETRY)).waits == [pytest.approx(0.12)]


def test_timeouts_are_transient_and_retried_at_most_five_times(server: FakeLLMServer) -> None:
    server.responder = lambda r: Hang(5)
    outcome = call(server, RetryPolicy(**FAST_RETRY), timeout=0.2)
    assert outcome.error.kind == "transient" and outcome.attempts == 6
    assert server.count() == 6


def test_backoff_is_exponential_with_jitter() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=5.0)
    rng = random.Random(1)
    waits = [policy.wait(n, None, rng) for n in range(1, 6)]
    for n, wait in enumerate(waits, start=1):
        ceiling = min(5.0, 2 ** (n - 1))
        assert ceiling / 2 <= wait <= ceiling


def test_context_length_error_is_permanent_and_suggests_probing(server: FakeLLMServer) -> None:
    server.max_prompt_chars = 1
    outcome = call(server, RetryPolicy(**FAST_RETRY))
    assert outcome.error.kind == "permanent" and outcome.attempts == 1
    assert "maximum context length" in outcome.error.message and "probe-window" in outcome.error.message
