"""Shared fixtures: the local fake LLM server, sample paths and parameter builders."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeLLMServer, RecordedRequest, Text

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "evalnb" / "data" / "wildtrace"
FAST_RETRY = {"max_retries": 5, "base_delay": 0.01, "max_delay": 0.02, "retry_after_cap": 0.3}


@pytest.fixture(autouse=True)
def own_quota_ledgers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test paces against quota ledgers of its own (evalnb.providers.ledger), never the
    user's, and never another test's."""
    monkeypatch.setenv("EVALNB_QUOTA_DIR", str(tmp_path / "quota-ledgers"))


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def judge_total_for(prompt: str) -> int:
    """A deterministic verdict derived from the judge prompt (so reruns agree)."""
    return int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 101


def deterministic_responder(request: RecordedRequest) -> Text:
    if request.prompt.startswith("STRICT grader."):
        total = judge_total_for(request.prompt)
        return Text(f'Here is my grading.\n```json\n{{"points_awarded":[{total}],"total":{total}}}\n```')
    question = request.prompt.split("Question: ", 1)[1].split("\n", 1)[0]
    return Text(f"Answer to: {question}")


def openai_params(tmp_path: Path, url: str, **overrides: Any) -> dict[str, Any]:
    """WildTrace on the sample data, every role an OpenAI-compatible endpoint on ``url``."""
    params: dict[str, Any] = {
        "benchmark": "wildtrace", "run_name": "t", "output_dir": str(tmp_path / "run"),
        "data": str(SAMPLE / "tasks.json"), "corpus": str(SAMPLE / "corpus"),
        "concurrency": 4,
        "model": {"provider": "openai", "name": "contestant-x", "base_url": f"{url}/v1",
                  "caps": {"en": 50000, "cjk": 20000}},
        "judges": [{"provider": "openai", "name": f"judge-{i}", "base_url": f"{url}/v1"}
                   for i in (1, 2, 3)],
        "retry": dict(FAST_RETRY),
    }
    for key, value in overrides.items():
        params[key] = value
    return copy.deepcopy(params)


def offline_params(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    params = openai_params(tmp_path, "http://unused", **overrides)
    params["model"] = {"provider": "offline", "name": "extractive-bm25",
                       "caps": {"en": 50000, "cjk": 20000}}
    params["judges"] = [{"provider": "offline", "name": n}
                        for n in ("rubric-overlap", "rubric-overlap-strict", "rubric-overlap-lenient")]
    params.update(overrides)
    return params


def sample_tasks() -> list[dict[str, Any]]:
    return json.loads((SAMPLE / "tasks.json").read_text("utf-8"))["tasks"]
