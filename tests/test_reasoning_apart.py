"""Reasoning apart from the answer: recorded in the call's record, through the
secret filter and up to its limit; never sent to the judges; inline think blocks kept or
stripped (part of the fingerprint) and counted; shown folded in every evidence view."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.core.errors import ConfigError, FingerprintMismatch
from evalnb.evidence.items import evidence_text, load_evidence
from evalnb.evidence.items_html import evidence_html, tasks_view
from evalnb.core.reasoning import REASONING_KEPT
from tests.conftest import deterministic_responder
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text
from tests.test_evidence import run_all, shown
from tests.test_streaming_runs import params_for, stored
from tests.test_tasks_page import browser, console_errors, open_page  # noqa: F401  (the fixture)

KEY = "sk-" + "R3as0ning" * 4   # shaped like an OpenAI key: the secret filter must catch it


def thinking_contestant(request: RecordedRequest) -> Text:
    """Judges answer as elsewhere; the contestant reasons apart, in the API's own field."""
    reply = deterministic_responder(request)
    if request.prompt.startswith("STRICT grader."):
        return reply
    question = request.prompt.split("Question: ", 1)[1].split("\n", 1)[0]
    return Text(reply.text, reasoning=f"REASONING-MARK about {question}; my key is {KEY}.")


def judge_prompts(server: FakeLLMServer) -> list[str]:
    return [r.prompt for r in server.requests if r.prompt.startswith("STRICT grader.")]


@pytest.mark.parametrize("sdk", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("stream", [False, True])
def test_reasoning_is_recorded_apart_and_never_judged(server: FakeLLMServer, tmp_path: Path, sdk: str,
                                                      stream: bool) -> None:
    server.responder = thinking_contestant
    run = run_all(params_for(sdk, tmp_path, server.url, "r", stream=stream))
    called = [r for r in stored(run, "generate").values() if r["attempts"]]
    assert called
    for record in called:
        expected = f"REASONING-MARK about {record['text'][len('Answer to: '):]}; my key is {KEY}."
        assert record["reasoning"]["chars"] == len(expected) and not record["reasoning"]["truncated"]
        assert record["reasoning"]["text"] == expected.replace(KEY, "[redacted]")
        assert "REASONING-MARK" not in record["text"]
    assert judge_prompts(server) and not any("REASONING-MARK" in p for p in judge_prompts(server))
    for name in ("generate.jsonl", "responses.json", "evidence.json", "tasks.html", "scores.json"):
        assert KEY not in run.path(name).read_text(), name
    table = evalnb.reasoning_table(run).loc[("generate", "contestant-x")]
    assert table["calls"] == table["with_reasoning"] == len(called)
    assert table["think_block_kept"] == table["think_block_stripped"] == 0


def test_a_long_reasoning_keeps_its_length_and_its_ends(server: FakeLLMServer, tmp_path: Path) -> None:
    long = "BEGIN " + "".join(f"step {i}; " for i in range(6000)) + " END"
    assert len(long) > REASONING_KEPT
    server.responder = lambda r: deterministic_responder(r) if r.prompt.startswith("STRICT grader.") else \
        Text("The answer.", reasoning=long)
    run = run_all(params_for("openai", tmp_path, server.url, "long", stream=True))
    record = next(r for r in stored(run, "generate").values() if r["attempts"])
    kept = record["reasoning"]
    assert kept["chars"] == len(long) and kept["truncated"]
    assert kept["text"].startswith("BEGIN step 0;") and kept["text"].endswith(" END")
    assert f"{len(long) - REASONING_KEPT:,} characters of reasoning not kept" in kept["text"]
    assert len(kept["text"]) < REASONING_KEPT + 100


def inline_think(request: RecordedRequest) -> Text:
    """Every other answer opens with an inline think block, as a server without a reasoning parser sends."""
    reply = deterministic_responder(request)
    if request.prompt.startswith("STRICT grader."):
        return reply
    if sum(map(ord, request.prompt)) % 2:
        return Text(f"<think>\nTHINK-MARK weighing it up\n</think>\n\n{reply.text}")
    return reply


@pytest.mark.parametrize("strip", [False, True])
def test_an_inline_think_block_is_kept_or_stripped_and_counted(server: FakeLLMServer, tmp_path: Path,
                                                               strip: bool) -> None:
    server.responder = inline_think
    params = params_for("openai", tmp_path, server.url, "think")
    params["model"]["strip_think"] = strip
    run = run_all(params)
    called = [r for r in stored(run, "generate").values() if r["attempts"]]
    began = [r for r in called if "think_block" in r]
    sent = [r for r in server.requests if not r.prompt.startswith("STRICT grader.")]
    assert len(began) == sum(1 for r in sent if sum(map(ord, r.prompt)) % 2) > 0
    for record in began:
        assert record["think_block"] == ("stripped" if strip else "kept")
        assert record["text"].startswith("<think>") != strip
        assert ("THINK-MARK" in record["text"]) != strip
        if strip:
            assert record["text"].startswith("Answer to: ")
            assert record["reasoning"]["text"] == "THINK-MARK weighing it up"
    judged = judge_prompts(server)
    assert any("THINK-MARK" in p for p in judged) != strip   # what the judges see is the response
    table = evalnb.reasoning_table(run).loc[("generate", "contestant-x")]
    assert table[f"think_block_{'stripped' if strip else 'kept'}"] == len(began)
    assert table[f"think_block_{'kept' if strip else 'stripped'}"] == 0
    parts = json.loads(run.path("fingerprint.json").read_text())["parts"]
    assert ("strip_think" in parts) == strip   # absent when unset: older runs keep their fingerprint
    if strip:
        assert parts["strip_think"]["value"] == ["model"]
        params["model"]["strip_think"] = False
        with pytest.raises(FingerprintMismatch, match="strip_think"):
            evalnb.open_run(params)


def test_strip_think_on_an_unclosed_block_leaves_an_empty_answer(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = lambda r: deterministic_responder(r) if r.prompt.startswith("STRICT grader.") else \
        Text("<think>still weighing the clauses when the budget ran", finish="length")
    params = params_for("openai", tmp_path, server.url, "unclosed", stream=True)
    params["model"]["strip_think"] = True
    run = run_all(params)
    record = next(r for r in stored(run, "generate").values() if r["attempts"])
    assert (record["status"], record["text"], record["finish_reason"]) == ("empty", "", "length")
    assert record["reasoning"]["text"].startswith("still weighing") and record["think_block"] == "stripped"


@pytest.mark.parametrize("key, value, says", [
    ("stream", "sometimes", "model.stream: expected auto, true or false, got 'sometimes'"),
    ("stream", 1, "model.stream: expected auto, true or false, got 1"),
    ("stream_idle_timeout", 0, "model.stream_idle_timeout: expected a positive number of seconds"),
    ("max_call_seconds", "an hour", "model.max_call_seconds: expected a positive number of seconds"),
    ("strip_think", "yes", "model.strip_think: expected true or false"),
])
def test_a_bad_streaming_key_is_one_line_naming_it(tmp_path: Path, key: str, value: Any, says: str) -> None:
    params = params_for("openai", tmp_path, "http://127.0.0.1:9", "bad")
    params["model"][key] = value
    with pytest.raises(ConfigError) as error:
        evalnb.open_run(params)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_streaming_keys_belong_to_sdk_endpoints(tmp_path: Path) -> None:
    params = params_for("openai", tmp_path, "http://127.0.0.1:9", "offline")
    params["judges"][1] = {"provider": "offline", "name": "rubric-overlap", "stream": True}
    with pytest.raises(ConfigError, match=r"judges\[1\]\.stream: expected it unset on a offline endpoint"):
        evalnb.open_run(params)


# --- the evidence views ---------------------------------------------------------------------------

def reasoning_run(server: FakeLLMServer, tmp_path: Path) -> evalnb.Run:
    server.responder = thinking_contestant
    return run_all(params_for("openai", tmp_path, server.url, "views"))


def test_reasoning_in_evidence_json_show_and_the_reports_tasks_section(server: FakeLLMServer, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    run = reasoning_run(server, tmp_path)
    records = stored(run, "generate")
    _, items = load_evidence(run.dir)
    called = [i for i in items if records[i.item_id]["attempts"]]
    assert called
    for item in called:
        (passage,) = [s for s in item.sections if s.label.startswith("reasoning")]
        assert passage.collapsed and passage.text == records[item.item_id]["reasoning"]["text"]
        labels = [s.label for s in item.sections]
        assert labels.index(passage.label) == labels.index("response") + 1
    item = called[0]
    text = shown(run.dir, item.item_id, capsys)
    assert records[item.item_id]["reasoning"]["text"] in text and "REASONING-MARK" in evidence_text(item)
    html = evidence_html(item)
    folded = html.split("<details>", 1)[1].split("</details>", 1)[0]
    assert "REASONING-MARK" in folded and "<summary><b>reasoning" in folded
    assert "REASONING-MARK" not in html.replace(folded, "")   # only inside the fold
    report = tasks_view(run.dir)._repr_html_()
    lowest = [i for i in called if f'id="evidence-{i.item_id}"' in report]
    assert lowest and all(report.count("<details><summary><b>reasoning") >= 1 for _ in lowest)


def test_reasoning_in_tasks_html_folded_until_opened(browser: Any, server: FakeLLMServer,  # noqa: F811
                                                     tmp_path: Path) -> None:
    run = reasoning_run(server, tmp_path)
    records = stored(run, "generate")
    item = next(key for key, r in records.items() if r["attempts"])
    open_page(browser, run.dir / "tasks.html")
    browser.find_element("css selector", f"tr.item[data-id='{item}']").click()
    details = browser.find_elements("css selector", "tr.detail details")
    folds = {d.find_element("css selector", "summary b").text: d for d in details}
    label = next(k for k in folds if k.startswith("reasoning"))
    fold = folds[label]
    assert fold.get_attribute("open") is None and not fold.find_element("css selector", "pre").is_displayed()
    assert folds["response"].get_attribute("open") is not None
    fold.find_element("css selector", "summary").click()
    assert fold.find_element("css selector", "pre").text == records[item]["reasoning"]["text"]
    assert KEY not in browser.page_source and console_errors(browser) == []
