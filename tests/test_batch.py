"""Batch mode through the real SDKs against the local batch APIs (tests/fakebatch.py).

Expected numbers come from live runs on the same scripted replies, or from the fake server's
own token counts; batch states move on retrieves, never on time.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.execution.batch import WAIT_ENV, batch_price
from evalnb.execution.batch.engine import CRASH_ENV
from evalnb.app.main import main
from evalnb.core.errors import ConfigError
from tests.conftest import FAST_RETRY, ROOT, deterministic_responder, openai_params
from tests.fakebatch import FakeBatches
from tests.fakeserver import Empty, Error, FakeLLMServer, RecordedRequest, Refusal, Text, WrongShape

PROVIDERS = ("openai", "anthropic", "gemini")
GEOKTOOLS = ROOT / "evalnb" / "data" / "geoktools"
GEOEXPERT = ROOT / "evalnb" / "data" / "geoexpertqueries"
# What differs between a live record and a batched record of the same reply: when and how it
# was sent, and the provider's request identifier.
TRANSPORT = {"attempts", "waits", "started_at", "elapsed_s", "request_id", "batch", "latency"}


def base_url(provider: str, server: FakeLLMServer) -> str:
    provider = provider.removesuffix("-file")
    return f"{server.url}/v1" if provider == "openai" else server.url


def endpoint(provider: str, server: FakeLLMServer, name: str, **extra: Any) -> dict[str, Any]:
    """``gemini-file``: Gemini with every batch sent as an uploaded JSONL file, never inline."""
    if provider == "gemini-file":
        provider = "gemini"
        if extra.get("mode") == "batch":
            extra["batch"] = {"inline_max_bytes": 0}
    return {"provider": provider, "name": name, "base_url": base_url(provider, server), **extra}


def responder(request: RecordedRequest) -> Text:
    """Every benchmark's prompts answered deterministically from the prompt alone."""
    prompt = request.prompt
    if prompt.startswith(("STRICT grader.", "Answer using ONLY")):
        return deterministic_responder(request)
    digest = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    if prompt.startswith("Today is "):   # GeoExpertQueries autorater
        return Text(json.dumps({"rating": digest % 3, "justification": "j"}))
    if prompt.startswith("QUESTION:\n") and "GOLDEN ANSWER:" in prompt:   # GeoKTools judge
        score = (digest % 5) / 4
        return Text(json.dumps({"element_scores": [score], "score": score, "rationale": "r"}))
    return Text(f"[{digest % 1000}]")   # a GeoKTools answer


def wildtrace(tmp: Path, server: FakeLLMServer, providers: tuple[str, str, str, str], modes: tuple[str, ...]
              ) -> dict[str, Any]:
    """WildTrace on the sample: the contestant and three judges on ``providers`` in ``modes``."""
    params = openai_params(tmp, server.url)
    params["model"] = endpoint(providers[0], server, "contestant-x", caps={"en": 50000, "cjk": 20000},
                               mode=modes[0])
    params["judges"] = [endpoint(p, server, f"judge-{i}", mode=m)
                        for i, (p, m) in enumerate(zip(providers[1:], modes[1:]), start=1)]
    return params


def geoktools(tmp: Path, server: FakeLLMServer, provider: str, mode: str) -> dict[str, Any]:
    return {"benchmark": "geoktools", "run_name": "gk", "output_dir": str(tmp / "run"),
            "data": str(GEOKTOOLS / "cases.json"), "scorer": "llm", "retry": dict(FAST_RETRY),
            "model": endpoint(provider, server, "geo-agent", mode=mode),
            "judges": [endpoint(provider, server, "geo-judge", mode=mode)]}


def geoexpert(tmp: Path, server: FakeLLMServer, provider: str, mode: str) -> dict[str, Any]:
    return {"benchmark": "geoexpertqueries", "run_name": "geq", "output_dir": str(tmp / "run"),
            "data": str(GEOEXPERT / "queries.json"), "traces": str(GEOEXPERT / "traces.jsonl"),
            "rating_date": "2026-11-30", "retry": dict(FAST_RETRY),
            "judges": [endpoint(provider, server, "autorater", mode=mode)]}


def run_all(params: dict[str, Any]) -> dict[str, Any]:
    run = evalnb.open_run(params)
    try:
        evalnb.generate(run)
        evalnb.judge(run)
        evalnb.aggregate(run)
        return json.loads(run.path("scores.json").read_text())
    finally:
        run.close()


def stage(params: dict[str, Any], name: str) -> evalnb.Run:
    run = evalnb.open_run(params)
    try:
        getattr(evalnb, name)(run)
    finally:
        run.close()
    return run


def records(run_dir: Path, name: str) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (run_dir / f"{name}.jsonl").read_text().splitlines():
        record = json.loads(line)
        out[record["key"]] = record
    return out


def journal(run_dir: Path) -> list[dict[str, Any]]:
    from evalnb.execution.batch.journal import read_only
    return read_only(run_dir)


def numbers(scores: dict[str, Any]) -> dict[str, Any]:
    """What a reader of scores.json compares: headline numbers and every task and verdict."""
    keep = {k: v for k, v in scores.items() if isinstance(v, (int, float, type(None))) or k in ("resumable",)}
    tasks = json.dumps(scores["tasks"], sort_keys=True)
    return keep | {"tasks": tasks, **{k: scores[k] for k in ("status_counts", "by_k", "methods", "rating_counts",
                                                               "agreement", "ci") if k in scores}}


@pytest.fixture(autouse=True)
def no_response_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests send the same requests live and then batched, to compare the two ways of
    sending: the response cache (which would answer the second from the first) stays out."""
    monkeypatch.setenv("EVALNB_CACHE", "off")


@pytest.fixture
def batches(server: FakeLLMServer) -> FakeBatches:
    server.responder = responder
    return FakeBatches(server)


@pytest.fixture
def waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stage polls until its batches end (``evalnb run --wait``), without pausing."""
    monkeypatch.setenv(WAIT_ENV, "0")


# --- identical requests ----------------------------------------------------------------------------

BENCHMARKS = {
    "wildtrace": lambda tmp, server, p, mode: wildtrace(tmp, server, (p, p, p, p), (mode,) * 4),
    "geoktools": geoktools,
    "geoexpertqueries": geoexpert,
}


@pytest.mark.parametrize("bench", sorted(BENCHMARKS))
@pytest.mark.parametrize("provider", [*PROVIDERS, "gemini-file"])
def test_batched_requests_carry_exactly_the_live_bodies(server: FakeLLMServer, batches: FakeBatches, tmp_path: Path,
                                                        waiting: None, provider: str, bench: str) -> None:
    live = run_all(BENCHMARKS[bench](tmp_path / "live", server, provider, "live"))
    sent_live = list(server.requests)
    batched = run_all(BENCHMARKS[bench](tmp_path / "batch", server, provider, "batch"))
    assert len(server.requests) == len(sent_live)                  # nothing went live in batch mode
    assert numbers(batched) == numbers(live)
    assert len(batches.requests) == len(sent_live) > 0

    def by_call(requests: list[RecordedRequest]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        out: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in requests:
            out.setdefault((r.model, r.prompt), []).append(r.body)
        return out
    live_bodies, batch_bodies = by_call(sent_live), by_call(batches.requests)
    assert live_bodies.keys() == batch_bodies.keys()
    for call, bodies in live_bodies.items():
        for got, want in zip(batch_bodies[call], bodies, strict=True):
            assert sorted(got) == sorted(want), f"{provider} {bench}: fields differ"
            for name in want:
                assert got[name] == want[name], f"{provider} {bench}: field {name!r} differs"
    if bench == "geoktools":   # the structured-output schema and the system prompt travel too
        judged = [b for (model, _), bs in batch_bodies.items() if model == "geo-judge" for b in bs]
        field = {"openai": "response_format", "anthropic": "output_config"}.get(provider, "generationConfig")
        assert judged and all(field in b for b in judged)
    assert all(bool(b.metadata.get("_input_file")) == (provider == "gemini-file")
               for b in batches.created if b.api == "gemini")


# --- a whole WildTrace pipeline -----------------------------------------------------------------------

def test_batched_contestant_and_mixed_panel_give_the_live_numbers(server: FakeLLMServer, batches: FakeBatches,
                                                                  tmp_path: Path) -> None:
    providers = ("openai", "gemini", "anthropic", "openai")
    live_params = wildtrace(tmp_path / "live", server, providers, ("live",) * 4)
    live = run_all(live_params)
    live_requests = len(server.requests)
    mixed = wildtrace(tmp_path / "mixed", server, providers, ("batch", "batch", "live", "batch"))
    passes = []
    for _ in range(4):   # no --wait: each run polls once, collects what ended, submits what is due
        scores = run_all(mixed)
        passes.append((scores["complete"], len(batches.created)))
        if scores["complete"]:
            break
    # Run 1 submits the contestant's batch; run 2 collects it and submits two judges' batches
    # (the live judge answers at once); run 3 collects them and completes.
    assert passes == [(False, 1), (False, 3), (True, 3)]
    assert numbers(scores) == numbers(live)
    assert scores["overall"] is not None and scores["scored_n"] == live["scored_n"] == 11
    for name in ("generate", "judge"):
        want, got = records(tmp_path / "live" / "run", name), records(tmp_path / "mixed" / "run", name)
        assert got.keys() == want.keys()
        for key, record in got.items():
            assert {k: v for k, v in record.items() if k not in TRANSPORT} == \
                   {k: v for k, v in want[key].items() if k not in TRANSPORT}, key
            if record.get("attempts"):
                batched = record["endpoint"] in ("model", "judge1", "judge3")
                assert ("batch" in record) == batched, key
    # Each batched call was sent once, in a batch; the live judge's calls were live.
    assert sorted(b.api for b in batches.created) == ["gemini", "openai", "openai"]
    assert [r.model for r in server.requests[live_requests:]] == ["judge-2"] * 11
    manifest = json.loads((tmp_path / "mixed" / "run" / "manifest.json").read_text())
    judge = manifest["stages"]["judge"]
    assert judge["modes"] == {"judge1": "batch", "judge2": "live", "judge3": "batch"}
    assert {b["batch_id"] for b in manifest["stages"]["generate"]["batches"]} == {batches.created[0].id}
    assert all(b["state"] == "collected" and b["submitted_at"] and b["finished_at"] for b in judge["batches"])


# --- waiting, and the next run ------------------------------------------------------------------------

def test_run_exits_2_while_batches_run_and_the_same_command_collects(
        server: FakeLLMServer, batches: FakeBatches, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = wildtrace(tmp_path, server, ("anthropic", "openai", "openai", "openai"), ("batch",) + ("live",) * 3)
    (tmp_path / "p.json").write_text(json.dumps(params))
    batches.hold = True
    assert main(["run", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if "waiting for" in x)
    assert "waiting for 1 batch (11 calls; generate) submitted since " in line
    assert line.endswith("run the same command again to collect")
    run_dir = tmp_path / "run"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "incomplete"
    assert [e["state"] for e in journal(run_dir)] == ["submitted"]

    # evalnb status shows it without touching anything.
    before = {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in run_dir.rglob("*") if p.is_file()}
    retrieves = batches.retrieves
    assert main(["status", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert batches.created[0].id in out and "submitted" in out and "1 in flight (11 calls)" in out
    assert {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in run_dir.rglob("*") if p.is_file()} == before
    assert batches.retrieves == retrieves

    # Still running: the next run (here one stage alone) polls once and says so again; then it
    # ends and is collected.
    assert main(["run", str(tmp_path / "p.json"), "--stage", "generate"]) == 2
    assert "waiting for 1 batch (11 calls; generate)" in capsys.readouterr().err
    assert len(batches.created) == 1
    batches.release()
    assert main(["run", str(tmp_path / "p.json")]) == 0
    assert len(batches.created) == 1
    scores = json.loads((run_dir / "scores.json").read_text())
    assert scores["complete"] and scores["scored_n"] == 11
    assert "04_report.ipynb" in {p.name for p in run_dir.iterdir()}
    report = (run_dir / "04_report.html").read_text()
    assert batches.created[0].id in report


def test_wait_polls_until_done(server: FakeLLMServer, batches: FakeBatches, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    params = wildtrace(tmp_path, server, ("gemini",) * 4, ("batch",) * 4)
    (tmp_path / "p.json").write_text(json.dumps(params))
    batches.steps = 3   # each batch ends on its third retrieve
    assert main(["run", str(tmp_path / "p.json"), "--wait", "--poll-interval", "0.01"]) == 0
    assert len(batches.created) == 4 and all(b.polls == 3 for b in batches.created)
    assert json.loads((tmp_path / "run" / "scores.json").read_text())["complete"]
    assert WAIT_ENV not in os.environ


# --- never submit twice ------------------------------------------------------------------------------

KILLED = """
import json, sys
import evalnb
run = evalnb.open_run(json.loads(sys.argv[1]))
evalnb.generate(run)
"""


@pytest.mark.parametrize("provider", PROVIDERS)
def test_kill_between_submit_and_journal_does_not_submit_twice(server: FakeLLMServer, batches: FakeBatches,
                                                               tmp_path: Path, provider: str) -> None:
    params = wildtrace(tmp_path, server, (provider, "openai", "openai", "openai"), ("batch",) + ("live",) * 3)
    env = {**os.environ, CRASH_ENV: "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", KILLED, json.dumps(params)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 75, done.stderr          # died right after the provider accepted the batch
    assert len(batches.created) == 1
    run_dir = tmp_path / "run"
    (entry,) = journal(run_dir)
    assert entry["state"] == "intent" and entry["batch_id"] is None

    run = stage(params, "generate")                    # the resume looks first, finds it, adopts it
    assert len(batches.created) == 1
    (entry,) = journal(run_dir)
    assert entry["state"] == "collected" and entry["adopted"]
    assert entry["batch_id"].removeprefix("batches/") == batches.created[0].id
    generated = records(run.dir, "generate")
    assert sum(r["status"] == "ok" for r in generated.values()) == 11
    assert all(r["batch"]["id"] == entry["batch_id"] for r in generated.values() if r.get("attempts"))
    assert max(server.success_counts.values()) == 1    # every call answered exactly once


def test_an_intent_the_provider_never_got_is_abandoned_and_resent(server: FakeLLMServer, batches: FakeBatches,
                                                                  tmp_path: Path, waiting: None) -> None:
    params = wildtrace(tmp_path, server, ("openai",) * 4, ("batch",) + ("live",) * 3)
    server.routes.insert(0, lambda req, path: (_refuse_once(batches, "openai")
                                               if path == "/v1/batches" and req.method == "POST" else None))
    stage(params, "generate")
    entries = journal(tmp_path / "run")
    assert [e["state"] for e in entries] == ["abandoned", "collected"]
    assert len(batches.created) == 1 and entries[1]["batch_id"] == batches.created[0].id
    assert sum(r["status"] == "ok" for r in records(tmp_path / "run", "generate").values()) == 11


def test_an_adopted_batch_whose_results_are_not_ours_is_abandoned(server: FakeLLMServer, batches: FakeBatches,
                                                                   tmp_path: Path) -> None:
    """Anthropic batches carry no metadata: an intent is matched by time and size, then checked
    by the custom ids of its results."""
    import anthropic

    params = wildtrace(tmp_path, server, ("anthropic", "openai", "openai", "openai"), ("batch",) + ("live",) * 3)
    server.routes.insert(0, lambda req, path: (_refuse_once(batches, "anthropic")
                                               if path == "/v1/messages/batches" and req.method == "POST" else None))
    stage(params, "generate")                      # the create failed: an intent, maybe created, maybe not
    (entry,) = journal(tmp_path / "run")
    assert entry["state"] == "intent" and "overloaded" in entry["last_error"]
    client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    foreign = client.messages.batches.create(requests=[   # someone else's batch of the same size, just after
        {"custom_id": f"theirs-{i}", "params": {"model": "other", "max_tokens": 5,
                                                "messages": [{"role": "user", "content": f"Question: x{i}\n"}]}}
        for i in range(11)])
    stage(params, "generate")                      # adopted by time and size, refused by its results
    first, second = journal(tmp_path / "run")
    assert (first["state"], first["batch_id"], first["adopted"]) == ("abandoned", foreign.id, True)
    assert second["state"] == "submitted" and second["calls"] == 11
    assert not any("batch" in r for r in records(tmp_path / "run", "generate").values())
    stage(params, "generate")
    generated = records(tmp_path / "run", "generate")
    assert sum(r["status"] == "ok" for r in generated.values()) == 11
    assert {r["batch"]["id"] for r in generated.values() if r.get("attempts")} == {second["batch_id"]}


def test_an_endpoint_switched_to_live_still_collects_its_batch(server: FakeLLMServer, batches: FakeBatches,
                                                               tmp_path: Path) -> None:
    params = wildtrace(tmp_path, server, ("openai",) * 4, ("batch",) + ("live",) * 3)
    stage(params, "generate")
    params["model"]["mode"] = "live"
    stage(params, "generate")                      # collected, and nothing it holds is made again live
    generated = records(tmp_path / "run", "generate")
    assert sum(r["status"] == "ok" and "batch" in r for r in generated.values()) == 11
    assert server.requests == []


def _refuse_once(batches: FakeBatches, api: str) -> Any:
    """A 503 for the first batch create (the provider did not create it)."""
    from tests.fakeserver import _json_wire
    if getattr(batches, "_refused", False):
        return None
    batches._refused = True   # type: ignore[attr-defined]
    if api == "anthropic":
        return _json_wire(503, {"type": "error", "error": {"type": "api_error", "message": "overloaded"}})
    return _json_wire(503, {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}})


# --- failures inside a batch ------------------------------------------------------------------------

def question_of(task_id: str) -> str:
    tasks = json.loads((ROOT / "evalnb" / "data" / "wildtrace" / "tasks.json").read_text())["tasks"]
    return next(t["question_text"] for t in tasks if t["task_id"] == task_id)


def scripted(failures: dict[str, Any]) -> Any:
    """Answer prompts of the given tasks with a scripted reply once, then as usual."""
    pending = dict(failures)

    def respond(request: RecordedRequest) -> Any:
        for task_id, reply in list(pending.items()):
            if f"Question: {question_of(task_id)}\n" in request.prompt:
                del pending[task_id]
                return reply
        return responder(request)
    return respond


REPLY_KINDS = {"wt-sample-01": Refusal(), "wt-sample-02": Empty(), "wt-sample-03": Text(" \n"),
               "wt-sample-04": Error(400, "the request is invalid"), "wt-sample-05": Text("cut short", finish="length"),
               # (a 404 is the endpoint's, not the item's, tests/test_endpoint_failures.py)
               "wt-sample-06": Error(400, "Unsupported parameter: 'stop'")}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_every_kind_of_reply_is_recorded_as_live(server: FakeLLMServer, batches: FakeBatches, tmp_path: Path,
                                                 provider: str) -> None:
    """Refusal, empty, whitespace, a length stop and a permanent error: the batched record is the
    live record (status, text, finish reason, usage, route, error), transport fields aside."""
    server.responder = scripted(REPLY_KINDS)
    live = wildtrace(tmp_path / "live", server, (provider, "openai", "openai", "openai"), ("live",) * 4)
    stage(live, "generate")
    server.responder = scripted(REPLY_KINDS)
    batched = wildtrace(tmp_path / "batch", server, (provider, "openai", "openai", "openai"),
                        ("batch",) + ("live",) * 3)
    stage(batched, "generate")
    stage(batched, "generate")
    want, got = records(tmp_path / "live" / "run", "generate"), records(tmp_path / "batch" / "run", "generate")
    assert {k: r["status"] for k, r in got.items() if k in REPLY_KINDS} == {
        "wt-sample-01": "refused", "wt-sample-02": "empty", "wt-sample-03": "empty",
        "wt-sample-04": "failed_permanent", "wt-sample-05": "ok", "wt-sample-06": "failed_permanent"}
    for key, record in got.items():
        assert {k: v for k, v in record.items() if k not in TRANSPORT} == \
               {k: v for k, v in want[key].items() if k not in TRANSPORT}, key
    assert len(batches.created) == 1                  # nothing transient: nothing sent again


def test_a_malformed_reply_in_a_batch_is_transient(server: FakeLLMServer, batches: FakeBatches,
                                                   tmp_path: Path) -> None:
    server.responder = scripted({"wt-sample-02": WrongShape()})
    params = wildtrace(tmp_path, server, ("openai",) * 4, ("batch",) + ("live",) * 3)
    stage(params, "generate")
    stage(params, "generate")
    record = records(tmp_path / "run", "generate")["wt-sample-02"]
    assert record["status"] == "failed_transient" and record["error"]["code"] == "malformed_reply"
    assert len(batches.created[1].items) == 1          # sent again, alone


@pytest.mark.parametrize("provider", PROVIDERS)
def test_failed_requests_are_classified_and_transient_ones_resent(server: FakeLLMServer, batches: FakeBatches,
                                                                   tmp_path: Path, provider: str) -> None:
    server.responder = scripted({"wt-sample-02": Error(503, "busy"), "wt-sample-03": Error(400, "bad request"),
                                 "wt-sample-04": Refusal()})
    expired = question_of("wt-sample-05")
    batches.expire_if = lambda r: f"Question: {expired}\n" in r.prompt and len(batches.created) == 1
    params = wildtrace(tmp_path, server, (provider, "openai", "openai", "openai"), ("batch",) + ("live",) * 3)
    stage(params, "generate")    # submits
    stage(params, "generate")    # collects; resends the transient ones in a second batch
    run_dir = tmp_path / "run"
    first = records(run_dir, "generate")
    assert first["wt-sample-02"]["status"] == "failed_transient"       # resumable...
    assert first["wt-sample-05"]["status"] == "failed_transient"
    assert first["wt-sample-05"]["error"]["code"] == {"openai": "batch_expired", "anthropic": "batch_expired",
                                                      "gemini": "DEADLINE_EXCEEDED"}[provider]
    assert first["wt-sample-03"]["status"] == "failed_permanent"       # ...final
    assert first["wt-sample-03"]["error"]["status_code"] == 400
    assert first["wt-sample-04"]["status"] == "refused"
    assert len(batches.created) == 2
    resent = {r.prompt.split("Question: ", 1)[1].split("\n", 1)[0] for _, r in batches.created[1].items}
    assert resent == {question_of("wt-sample-02"), expired}
    stage(params, "generate")    # collects the second batch
    final = records(run_dir, "generate")
    assert final["wt-sample-02"]["status"] == final["wt-sample-05"]["status"] == "ok"
    assert final["wt-sample-03"]["status"] == "failed_permanent"
    assert len(batches.created) == 2                                   # nothing left to send


def test_transient_failures_resent_live_when_the_endpoint_says_so(server: FakeLLMServer, batches: FakeBatches,
                                                                   tmp_path: Path) -> None:
    server.responder = scripted({"wt-sample-02": Error(500, "internal")})
    params = wildtrace(tmp_path, server, ("anthropic", "openai", "openai", "openai"), ("batch",) + ("live",) * 3)
    params["model"]["batch"] = {"resend": "live"}
    stage(params, "generate")
    stage(params, "generate")
    generated = records(tmp_path / "run", "generate")
    assert generated["wt-sample-02"]["status"] == "ok" and "batch" not in generated["wt-sample-02"]
    assert [r.model for r in server.requests] == ["contestant-x"]      # the one call, live
    assert len(batches.created) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("outcome", ["failed", "expired"])
def test_a_batch_failed_or_expired_as_a_whole_makes_its_calls_resumable(
        server: FakeLLMServer, batches: FakeBatches, tmp_path: Path, provider: str, outcome: str) -> None:
    params = wildtrace(tmp_path, server, (provider, "openai", "openai", "openai"), ("batch",) + ("live",) * 3)
    batches.end_as.append(outcome)
    stage(params, "generate")
    stage(params, "generate")
    run_dir = tmp_path / "run"
    generated = records(run_dir, "generate")
    assert sum(r["status"] == "failed_transient" for r in generated.values()) == 11
    first, second = journal(run_dir)
    assert first["state"] in ("failed", "collected") and first["results"] == {"failed_transient": 11}
    assert second["state"] == "submitted" and second["calls"] == 11
    run = stage(params, "aggregate")
    scores = json.loads(run.path("scores.json").read_text())
    assert not scores["complete"] and scores["overall"] is None   # resumable: waiting for the second batch
    assert scores["resumable"]["generation"] == 11
    assert run_all(params)["complete"]                            # collects it
    assert sum(r["status"] == "ok" for r in records(run_dir, "generate").values()) == 11
    assert len(batches.created) == 2


# --- chunking ---------------------------------------------------------------------------------------

def test_chunks_respect_the_request_and_byte_limits(server: FakeLLMServer, batches: FakeBatches, tmp_path: Path,
                                                    waiting: None) -> None:
    params = wildtrace(tmp_path, server, ("openai", "anthropic", "openai", "openai"),
                       ("batch", "batch", "live", "live"))
    params["model"]["batch"] = {"max_requests": 4}
    params["judges"][0]["batch"] = {"max_bytes": 4_000}
    run_all(params)
    contestant = [b for b in batches.created if b.api == "openai"]
    assert [len(b.items) for b in contestant] == [4, 4, 3]
    judge = [b for b in batches.created if b.api == "anthropic"]
    assert len(judge) > 1 and sum(len(b.items) for b in judge) == 11
    for b in judge:   # each batch's requests, serialised as sent, under the byte limit
        assert sum(len(json.dumps({"custom_id": c, "params": r.body}, ensure_ascii=False,
                                  separators=(",", ":")).encode()) + 1 for c, r in b.items) <= 4_000
    assert len({b.id for b in batches.created}) == len(batches.created)
    tags = [e["key"] for e in journal(tmp_path / "run")]
    assert len(set(tags)) == len(tags)


def test_gemini_batches_too_large_to_send_inline_go_as_a_file(server: FakeLLMServer, batches: FakeBatches,
                                                              tmp_path: Path, waiting: None) -> None:
    live = run_all(wildtrace(tmp_path / "live", server, ("gemini",) * 4, ("live",) * 4))
    params = wildtrace(tmp_path / "batch", server, ("gemini",) * 4, ("batch", "batch", "live", "live"))
    for role in (params["model"], params["judges"][0]):
        role["batch"] = {"inline_max_bytes": 30_000}
    scores = run_all(params)
    assert numbers(scores) == numbers(live)
    contestant, judge = batches.created
    # 11 documents and questions come to about 47 kB: a file; 11 short judge prompts: inline.
    assert contestant.metadata["_input_file"] and not judge.metadata["_input_file"]
    size = len(batches.files[contestant.metadata["_input_file"]][1])
    assert size > 30_000
    assert all(r.get("batch", {}).get("id") == f"batches/{contestant.id}"
               for r in records(tmp_path / "batch" / "run", "generate").values() if r.get("attempts"))


def test_limits_are_data_with_their_sources() -> None:
    from evalnb.execution.batch import limits
    table = json.loads((ROOT / "evalnb" / "execution" / "batch" / "limits.json").read_text())
    for provider in PROVIDERS:
        assert table[provider]["source"] and limits(provider).max_requests == table[provider]["max_requests"]
        assert limits(provider).max_bytes <= table[provider]["max_bytes"]
    assert (table["openai"]["max_requests"], table["anthropic"]["max_requests"]) == (50_000, 100_000)


# --- cost ---------------------------------------------------------------------------------------------

def test_usage_is_costed_at_the_batch_price(server: FakeLLMServer, batches: FakeBatches, tmp_path: Path,
                                            waiting: None) -> None:
    params = wildtrace(tmp_path, server, ("openai",) * 4, ("batch", "batch", "live", "live"))
    params["prices"] = {"contestant-x": {"input": 2.0, "output": 8.0},
                        "judge-1": {"input": 1.0, "output": 4.0, "batch_input": 0.3, "batch_output": 1.0},
                        "judge-2": {"input": 1.0, "output": 4.0}}
    scores = run_all(params)
    sent = [r for r in batches.requests if r.model == "contestant-x"]
    tokens_in = sum(-(-len(r.prompt) // 4) for r in sent)             # the fake server's own count
    usage = scores["usage"]
    row = usage["generate"]["contestant-x"]
    assert row["batch_calls"] == row["calls"] == 11 and row["input_tokens"] == tokens_in
    assert row["cost_usd"] == pytest.approx((tokens_in * 1.0 + row["output_tokens"] * 4.0) / 1e6)   # half of 2, 8
    assert "50% of the live price" in row["batch_price"]
    j1, j2 = usage["judge"]["judge-1"], usage["judge"]["judge-2"]
    assert j1["cost_usd"] == pytest.approx((j1["input_tokens"] * 0.3 + j1["output_tokens"] * 1.0) / 1e6)
    assert "batch_calls" not in j2
    assert j2["cost_usd"] == pytest.approx((j2["input_tokens"] * 1.0 + j2["output_tokens"] * 4.0) / 1e6)
    assert batch_price(params["prices"], "judge-2") == {"input": 0.5, "output": 2.0}
    table = evalnb.usage_table(evalnb.open_run(params))
    assert table.loc[("generate", "contestant-x"), "batch_calls"] == 11
    assert "50% of the live price" in table.loc[("generate", "contestant-x"), "batch_price"]


def test_estimate_shows_live_and_batch_cost_side_by_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    params["model"]["mode"] = "batch"
    params["prices"] = {"contestant-x": {"input": 3.0, "output": 15.0}, "judge-1": {"input": 1.0, "output": 2.0}}
    (tmp_path / "p.json").write_text(json.dumps(params))
    assert main(["estimate", str(tmp_path / "p.json"), "--wide"]) == 0
    out = capsys.readouterr().out
    assert "max_total_cost_batch_usd" in out and "50% of the live price" in out
    from evalnb.pipeline.accounting import estimate
    from evalnb.pipeline.run import load_config, make_benchmark
    config, bench_class = load_config(tmp_path / "p.json")
    bench = make_benchmark(config, bench_class)
    rows = {(r["stage"], r["model"]): r for r in estimate(config, bench, bench.tasks, config.output_dir)}
    g = rows[("generate", "contestant-x")]
    assert g["mode"] == "batch" and g["max_total_cost_batch_usd"] == pytest.approx(g["max_total_cost_usd"] / 2)
    assert rows[("judge", "judge-1")]["mode"] == "live"
    assert rows[("judge", "judge-2")]["max_total_cost_batch_usd"] is None   # no price given


# --- the other two benchmarks in batch mode ------------------------------------------------------------

@pytest.mark.parametrize("provider", ["gemini", "anthropic"])
def test_geoktools_llm_judge_in_batch_mode(server: FakeLLMServer, batches: FakeBatches, tmp_path: Path,
                                           waiting: None, provider: str) -> None:
    live = geoktools(tmp_path / "live", server, provider, "live")
    live.pop("model")
    live["predictions"] = str(GEOKTOOLS / "predictions.jsonl")
    want = run_all(live)
    batched = dict(live, output_dir=str(tmp_path / "batch" / "run"),
                   judges=[endpoint(provider, server, "geo-judge", mode="batch")])
    got = run_all(batched)
    assert numbers(got) == numbers(want) and got["complete"]
    assert got["methods"]["judge"] == 16 == len(batches.requests)   # exact matches never sent
    assert [len(b.items) for b in batches.created] == [16]


def test_geoexpertqueries_autorater_in_batch_mode(server: FakeLLMServer, batches: FakeBatches, tmp_path: Path,
                                                  waiting: None) -> None:
    want = run_all(geoexpert(tmp_path / "live", server, "openai", "live"))
    got = run_all(geoexpert(tmp_path / "batch", server, "openai", "batch"))
    assert numbers(got) == numbers(want) and got["complete"]
    assert len(batches.requests) == 15                               # 5 traces x 3 runs, in one batch
    assert [len(b.items) for b in batches.created] == [15]


# --- parameters -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (lambda p: p["model"].update(mode="bulk"), r"model\.mode: expected live or batch"),
    (lambda p: p["model"].update(provider="offline", name="extractive-bm25", mode="batch"), r"batch needs provider"),
    (lambda p: p["model"].update(mode="batch", batch={"resend": "later"}), r"model\.batch\.resend"),
    (lambda p: p["model"].update(mode="batch", batch={"max_requests": 0}), r"model\.batch\.max_requests"),
    (lambda p: p["model"].update(mode="batch", batch={"size": 3}), r"model\.batch: expected a mapping"),
    (lambda p: p.update(prices={"m": {"input": 1, "output": 2, "batch": 1}}), r"prices: expected"),
])
def test_batch_parameters_are_checked(tmp_path: Path, change: Any, message: str) -> None:
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    change(params)
    with pytest.raises(ConfigError, match=message):
        evalnb.open_run(params)
    assert not (tmp_path / "run").exists()
