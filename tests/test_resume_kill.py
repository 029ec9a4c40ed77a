"""A process killed mid-run resumes to the same numbers as an uninterrupted run,
with no record lost or duplicated; and a key planted in the environment reaches the
endpoint but no file of the run directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalnb.app.main import main
from tests.conftest import deterministic_responder, openai_params
from tests.fakeserver import FakeLLMServer


def numbers(run_dir: Path) -> tuple:
    scores = json.loads((run_dir / "scores.json").read_text())
    return (scores["overall"], scores["scored_overall"], scores["scored_n"],
            [(t["task_id"], t["status"], t["score"]) for t in scores["tasks"]])


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("stage, after", [("generate", 3), ("judge", 8)])
def test_killed_run_resumes_to_the_same_numbers(tmp_path: Path, stage: str, after: int) -> None:
    with FakeLLMServer(latency=0.15) as server:
        server.responder = deterministic_responder
        reference = openai_params(tmp_path / "reference", server.url)
        (tmp_path / "ref.json").write_text(json.dumps(reference | {"concurrency": 4}))
        assert main(["run", str(tmp_path / "ref.json")]) == 0

        params = openai_params(tmp_path / "killed", server.url, cache=False)   # calls of its own to kill
        (tmp_path / "p.json").write_text(json.dumps(params))
        store = Path(params["output_dir"]) / f"{stage}.jsonl"
        process = subprocess.Popen([sys.executable, "-m", "evalnb.app.main", "run", str(tmp_path / "p.json")],
                                   start_new_session=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while len(lines(store)) < after and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        os.killpg(process.pid, signal.SIGKILL)   # the CLI, papermill and the kernel at once
        process.wait()
        killed_at = len(lines(store))
        assert after <= killed_at < (11 if stage == "generate" else 33), "killed too late to test"

        server.reset()
        server.responder = deterministic_responder
        assert main(["run", str(tmp_path / "p.json")]) == 0
        assert numbers(Path(params["output_dir"])) == numbers(Path(reference["output_dir"]))
        # No record lost or duplicated: one final line per call, whatever was in flight redone.
        for name, expected in (("generate.jsonl", 12), ("judge.jsonl", 33)):
            keys = [json.loads(line)["key"] for line in lines(Path(params["output_dir"]) / name)]
            assert len(keys) == len(set(keys)) == expected
        redone = server.count(model="contestant-x") if stage == "generate" else \
            sum(server.count(model=f"judge-{i}") for i in (1, 2, 3))
        assert redone <= (11 if stage == "generate" else 33) - killed_at + params["concurrency"] * 3


def test_planted_key_reaches_the_endpoint_and_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-planted-" + os.urandom(16).hex()
    monkeypatch.setenv("EVALNB_PLANTED_KEY", key)
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        params = openai_params(tmp_path, server.url)
        for endpoint in (params["model"], *params["judges"]):
            endpoint["api_key_env"] = "EVALNB_PLANTED_KEY"
        (tmp_path / "p.json").write_text(json.dumps(params))
        assert main(["run", str(tmp_path / "p.json")]) == 0
        assert server.requests and all(r.headers["authorization"] == f"Bearer {key}" for r in server.requests)
    files = [p for p in Path(params["output_dir"]).rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in files:
        assert key.encode() not in path.read_bytes(), path
        assert key[12:].encode() not in path.read_bytes(), path
