"""One quota ledger per endpoint, shared by every evalnb process of the user."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evalnb.providers import make_provider
from evalnb.providers.ledger import QuotaLedger, endpoint_identity, quota_dir
from evalnb.config import EndpointConfig
from tests.conftest import ROOT, openai_params
from tests.fakeserver import FakeLLMServer
from tests.test_pacing import TokenWindow

WINDOW = 1.5          # seconds: the server's window and the rate_limit's
BUDGET = 2000         # input tokens per window, as the server counts them (len // 4)


def sized_tasks(root: Path, n: int, chars: int, tag: str) -> tuple[Path, Path]:
    corpus = root / f"corpus-{tag}"
    corpus.mkdir(parents=True)
    tasks = []
    for i in range(n):
        (corpus / f"d{i}.txt").write_text(f"{tag} document {i}. " + "lorem ipsum dolor sit amet " * (chars // 27),
                                          "utf-8")
        tasks.append({"task_id": f"{tag}-{i}", "question_text": f"What is in document {i}?",
                      "corpus_file": f"d{i}.txt",
                      "ground_truth": {"scoring_rubric": [{"points": 10, "correct_criterion": "says it"}]}})
    data = root / f"tasks-{tag}.json"
    data.write_text(json.dumps({"tasks": tasks}), "utf-8")
    return data, corpus


GENERATE = textwrap.dedent("""
    import json, sys
    from evalnb.pipeline.run import open_run
    from evalnb.pipeline.stages import generate
    run = open_run(json.loads(open(sys.argv[1]).read()))
    generate(run)
    run.close()
""")


def start_generate(params: dict, path: Path, quota_dir_: Path) -> subprocess.Popen[bytes]:
    path.write_text(json.dumps(params), "utf-8")
    env = dict(os.environ, EVALNB_QUOTA_DIR=str(quota_dir_), PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", GENERATE, str(path)], env=env, cwd=path.parent,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def two_processes(tmp_path: Path, server: FakeLLMServer, separate: bool) -> TokenWindow:
    quota = TokenWindow(budget=BUDGET, window=WINDOW)
    server.responder = quota
    procs = []
    for tag in ("a", "b"):
        data, corpus = sized_tasks(tmp_path, 10, 2000, tag)
        params = openai_params(tmp_path / tag, server.url, data=str(data), corpus=str(corpus),
                               retry={"max_retries": 0})
        # The same endpoint (provider, base URL, model, key variable) in both processes.
        params["model"]["rate_limit"] = {"input_tokens_per_minute": BUDGET, "window_seconds": WINDOW}
        ledgers = tmp_path / (f"ledgers-{tag}" if separate else "ledgers")
        procs.append(start_generate(params, tmp_path / f"params-{tag}.json", ledgers))
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-2000:]
    return quota


def fullest_window(server: FakeLLMServer) -> int:
    """Most input tokens the server received in any window, from its own log of arrivals."""
    arrivals = [(r.time, max(1, len(r.prompt) // 4)) for r in server.requests]
    return max(sum(n for s, n in arrivals if t - WINDOW < s <= t) for t, _ in arrivals)


@pytest.mark.slow
def test_two_processes_on_one_endpoint_never_exceed_its_window(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        quota = two_processes(tmp_path, server, separate=False)
        assert len(server.requests) == 20
        assert quota.rejected == 0
        assert fullest_window(server) <= BUDGET


@pytest.mark.slow
def test_separate_ledgers_on_purpose_pace_each_process_alone(tmp_path: Path) -> None:
    """The control: each process within the window alone, the two together over it (429s)."""
    with FakeLLMServer() as server:
        quota = two_processes(tmp_path, server, separate=True)
        assert quota.rejected > 0
        assert fullest_window(server) > BUDGET or quota.rejected > 0


def endpoint(**extra: object) -> EndpointConfig:
    base = {"provider": "openai", "name": "judge-a", "base_url": "http://127.0.0.1:9/v1",
            "api_key_env": "JUDGE_KEY", "rate_limit": {"requests_per_minute": 10}, "role": "judges[0]"}
    return EndpointConfig(**(base | extra))  # type: ignore[arg-type]


def ledger_of(provider: object) -> QuotaLedger:
    ledger = provider.pacer.shared  # type: ignore[attr-defined]
    assert isinstance(ledger, QuotaLedger)
    return ledger


def test_the_endpoint_and_its_key_variable_name_the_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-" + "live-abcdefghijklmnopqrstuvwxyz0123456789"   # a key-shaped value, made here: none is tracked
    monkeypatch.setenv("JUDGE_KEY", key)
    monkeypatch.setenv("OTHER_KEY", key)
    same = ledger_of(make_provider(endpoint())).path
    assert ledger_of(make_provider(endpoint(role="judges[1]", concurrency=3))).path == same   # role: not the quota
    assert ledger_of(make_provider(endpoint(rate_limit={"requests_per_minute": 99}))).path == same
    for other in (endpoint(name="judge-b"), endpoint(base_url="http://127.0.0.1:10/v1"),
                  endpoint(api_key_env="OTHER_KEY"), endpoint(provider="anthropic", base_url="http://127.0.0.1:9")):
        assert ledger_of(make_provider(other)).path != same
    assert same.parent == quota_dir()


def test_a_ledger_holds_no_key_and_no_password(tmp_path: Path) -> None:
    identity = endpoint_identity("openai", "https://user:hunter2@gateway.example/v1/", "m", "JUDGE_KEY")
    assert identity == {"provider": "openai", "base_url": "https://gateway.example/v1", "model": "m",
                        "api_key_env": "JUDGE_KEY"}
    ledger = QuotaLedger(identity, tmp_path)
    with ledger.window(0.0) as entries:
        entries.clear()
    text = ledger.path.read_text()
    assert "hunter2" not in text and "JUDGE_KEY" in text


def test_entries_of_a_killed_process_age_out_with_the_window(tmp_path: Path) -> None:
    """A process that dies holding entries needs no cleanup: they leave with their window."""
    ledger = QuotaLedger(endpoint_identity("openai", None, "m", None), tmp_path)
    from evalnb.providers.ledger import WindowEntry
    now = time.monotonic()
    with ledger.window(now - 60) as entries:
        entries.append(WindowEntry(now - 30, {"requests": 1, "input_tokens": 5, "output_tokens": 7}, "999999-1"))
        entries.append(WindowEntry(now - 1, {"requests": 1, "input_tokens": 6, "output_tokens": 8}, "999999-2"))
    with ledger.window(now - 10) as entries:
        assert [e.id for e in entries] == ["999999-2"]
    with ledger.window(now - 60) as entries:   # the older entry was dropped for good
        assert [e.id for e in entries] == ["999999-2"]


def test_a_ledger_of_an_earlier_boot_is_read_as_empty(tmp_path: Path) -> None:
    ledger = QuotaLedger(endpoint_identity("openai", None, "m", None), tmp_path)
    ledger.path.parent.mkdir(parents=True, exist_ok=True)
    ledger.path.write_text(json.dumps({"boot": "another-boot", "entries": [["1-1", 1e12, 1, 2, 3]]}))
    with ledger.window(0.0) as entries:
        assert not entries
