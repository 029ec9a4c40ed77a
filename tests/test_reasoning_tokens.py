"""Reasoning tokens count as output where billed as output, and are recorded on
their own; costs computed by hand. Through the real SDKs against the local server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalnb.app.main import main
from tests.conftest import deterministic_responder, openai_params
from tests.fakeserver import FakeLLMServer, Raw, RecordedRequest, Reply

PRICES = {"input": 1.25, "output": 10.0}   # USD per million tokens


def gemini_with_thoughts(request: RecordedRequest) -> Reply:
    if request.api != "gemini":
        return deterministic_responder(request)
    return Raw({"candidates": [{"content": {"role": "model", "parts": [{"text": "The answer."}]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 1000, "candidatesTokenCount": 40,
                                  "thoughtsTokenCount": 700, "totalTokenCount": 1740},
                "modelVersion": "gemini-think-001"})


def openai_with_reasoning(request: RecordedRequest) -> Reply:
    if request.model != "contestant-x":
        return deterministic_responder(request)
    return Raw({"id": "c1", "object": "chat.completion", "created": 0, "model": "contestant-x",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "The answer.", "refusal": None}}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 650, "total_tokens": 1550,
                          "completion_tokens_details": {"reasoning_tokens": 600}}})


def run_usage(tmp_path: Path, params: dict) -> dict:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(params))
    assert main(["run", str(path), "--stage", "generate", "--stage", "judge", "--stage", "aggregate"]) == 0
    return json.loads((Path(params["output_dir"]) / "scores.json").read_text())["usage"]["generate"]


def in_scope_tasks(params: dict) -> int:
    tasks = json.loads(Path(params["data"]).read_text())["tasks"]
    corpus = Path(params["corpus"])
    cap = params["model"]["caps"]["en"]
    return sum(len((corpus / t["corpus_file"]).read_text("utf-8")) <= cap for t in tasks)


def test_gemini_thoughts_are_output_and_recorded_apart(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = gemini_with_thoughts
        params = openai_params(tmp_path, server.url)
        params["model"] = {"provider": "gemini", "name": "gemini-think", "base_url": server.url,
                           "caps": params["model"]["caps"]}
        params["prices"] = {"gemini-think": PRICES}
        usage = run_usage(tmp_path, params)["gemini-think"]
    n = in_scope_tasks(params)
    assert n > 0 and usage["calls"] == n
    assert usage["input_tokens"] == 1000 * n
    assert usage["output_tokens"] == (40 + 700) * n        # thinking is billed as output
    assert usage["reasoning_tokens"] == 700 * n
    assert usage["cost_usd"] == pytest.approx(n * (1000 * 1.25 + 740 * 10.0) / 1e6)


def test_openai_reasoning_tokens_are_recorded_apart_and_not_added_twice(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = openai_with_reasoning
        params = openai_params(tmp_path, server.url)
        params["prices"] = {"contestant-x": PRICES}
        usage = run_usage(tmp_path, params)["contestant-x"]
    n = in_scope_tasks(params)
    assert usage["output_tokens"] == 650 * n               # completion_tokens already holds them
    assert usage["reasoning_tokens"] == 600 * n
    assert usage["cost_usd"] == pytest.approx(n * (900 * 1.25 + 650 * 10.0) / 1e6)
