"""Optional: the pipeline and the probe against a real OpenAI-compatible local model server.

Skipped unless LOCAL_LLM_URL is set (e.g. ``http://127.0.0.1:8080/v1`` for llama.cpp's
server; see the README). LOCAL_LLM_MODEL names the model (default ``local``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import evalnb
from evalnb.stages.probe import probe_window
from tests.conftest import SAMPLE

URL = os.environ.get("LOCAL_LLM_URL")
pytestmark = [pytest.mark.local_llm,
              pytest.mark.skipif(not URL, reason="set LOCAL_LLM_URL to a local OpenAI-compatible server")]


def params(tmp_path: Path) -> dict:
    endpoint = {"provider": "openai", "name": os.environ.get("LOCAL_LLM_MODEL", "local"),
                "base_url": URL, "timeout": 600}
    tasks = json.loads((SAMPLE / "tasks.json").read_text())["tasks"]
    small = [t for t in tasks if t["task_id"] in ("wt-sample-12", "wt-sample-10", "wt-sample-05")]
    (tmp_path / "d.json").write_text(json.dumps(small, ensure_ascii=False))
    return {"benchmark": "wildtrace", "run_name": "local", "output_dir": str(tmp_path / "run"),
            "data": str(tmp_path / "d.json"), "corpus": str(SAMPLE / "corpus"), "concurrency": 1,
            "model": endpoint | {"caps": {"en": 12000, "cjk": 4000}}, "judges": [endpoint],
            "retry": {"max_retries": 1, "base_delay": 1.0}}


def test_pipeline_against_a_real_local_model(tmp_path: Path) -> None:
    run = evalnb.open_run(params(tmp_path))
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    records = json.loads(run.path("responses.json").read_text())["records"]
    assert {r["task_id"]: r["status"] for r in records}["wt-sample-10"] == "out_of_context"
    assert all(r["usage"]["input_tokens"] > 0 for r in records if r["status"] == "ok")
    scores = json.loads(run.path("scores.json").read_text())
    # A small base model may reply without JSON: that is a judge failure, never a zero.
    assert scores["complete"] or scores["resumable"]["judge_calls"] > 0


def test_probe_against_a_real_local_model(tmp_path: Path) -> None:
    config = evalnb.open_run(params(tmp_path)).config
    results = probe_window(config, upper={"en": 60_000, "cjk": 20_000}, max_calls=25, max_tokens=16)
    for result in results:
        assert 0 < result.accepted_chars < (60_000 if result.kind == "en" else 20_000)
