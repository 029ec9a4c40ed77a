"""An endpoint that refuses for reasons of its own has not answered, and a request
that never reached the provider is transient and not billed.

Through the real SDKs against tests/fakeserver.py, which answers each refusal in its API's own
wire format (``endpoint_error``): the kind of failure at the provider, then the runner's stop
(no further request reaches the fake), then whole stages through the library functions (no
kernel), with a fixed endpoint's rerun equal to a fault-free run.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.core.errors import EndpointFailure
from evalnb.records.stores import JsonlStore, read_lines
from evalnb.core.run_config import EndpointConfig
from evalnb.providers import make_provider
from evalnb.providers.base import ChatRequest
from evalnb.providers.retry import Outcome, RetryPolicy, call_with_retries
from evalnb.evidence.failures import incomplete_line
from tests.conftest import deterministic_responder, openai_params
from tests.fakeserver import (ENDPOINT_ERROR_KINDS, Error, FakeLLMServer, RecordedRequest, Refusal, Reply,
                              endpoint_error, gemini_rate_limit)
from tests.test_resume_kill import numbers

SDKS = ("openai", "anthropic", "gemini")
POLICY = RetryPolicy(max_retries=5, base_delay=0.01, max_delay=0.02, retry_after_cap=0.05)
CAUSES = {"401": "authentication", "403": "permission", "404": "model or route not found",
          "402": "billing or quota", "quota": "billing or quota"}


def endpoint(sdk: str, url: str, **extra: Any) -> EndpointConfig:
    base = f"{url}/v1" if sdk == "openai" else url
    return EndpointConfig(provider=sdk, name="contestant-x", base_url=base, concurrency=1, timeout=10.0, **extra)


def outcome(ep: EndpointConfig, policy: RetryPolicy = POLICY) -> Outcome:
    async def go() -> Outcome:
        provider = make_provider(ep)
        assert provider is not None
        try:
            return await call_with_retries(provider, ChatRequest("q", 10), policy, random.Random(0))
        finally:
            await provider.aclose()
    return asyncio.run(go())


# --- the provider: which failures are the endpoint's --------------------------------------------

@pytest.mark.parametrize("kind", ENDPOINT_ERROR_KINDS)
@pytest.mark.parametrize("sdk", SDKS)
def test_an_endpoint_refusal_is_of_kind_endpoint_and_never_retried(server: FakeLLMServer, sdk: str,
                                                                   kind: str) -> None:
    server.queue(endpoint_error(kind, sdk))
    result = outcome(endpoint(sdk, server.url))
    assert result.completion is None and result.error is not None
    assert (result.error.kind, result.error.cause) == ("endpoint", CAUSES[kind])
    assert result.attempts == 1 and server.count() == 1
    assert result.error.message.startswith(f"HTTP {endpoint_error(kind, sdk).status}: ")
    assert endpoint_error(kind, sdk).message in result.error.message


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("sdk", SDKS)
def test_a_route_the_endpoint_does_not_have_is_an_endpoint_failure(server: FakeLLMServer, sdk: str,
                                                                    stream: bool) -> None:
    """A proxy in front that does not route the call's path (Gemini's :streamGenerateContent)."""
    server.unrouted = re.compile(r"(?i)generateContent|/v1/(messages|chat/completions)")
    result = outcome(endpoint(sdk, server.url, stream=stream))
    assert result.error is not None and (result.error.kind, result.error.status_code) == ("endpoint", 404)
    assert result.error.cause == "model or route not found"
    assert server.unrouted_count == 1


@pytest.mark.parametrize(("sdk", "reply", "kind"), [
    ("openai", Error(400, "Invalid value for 'temperature'", code="invalid_value"), "permanent"),
    ("anthropic", Error(400, "prompt is too long: 300000 tokens > 200000 maximum"), "permanent"),
    ("gemini", Error(400, "The input token count (3000000) exceeds the maximum number of tokens allowed "
                          "(1048576)."), "permanent"),
    ("openai", Error(413, "Request too large"), "permanent"),
    ("openai", Error(422, "Unprocessable"), "permanent"),
    ("openai", Error(429, "Rate limit reached", code="rate_limit_exceeded"), "transient"),
    ("gemini", gemini_rate_limit(), "transient"),   # RESOURCE_EXHAUSTED of a per-minute quota
])
def test_the_items_own_4xx_keep_their_meaning(server: FakeLLMServer, sdk: str, reply: Error, kind: str) -> None:
    server.queue(reply)
    result = outcome(endpoint(sdk, server.url), RetryPolicy(max_retries=0))
    assert result.error is not None and result.error.kind == kind and result.error.cause is None


@pytest.mark.parametrize("sdk", SDKS)
def test_a_content_filter_is_still_a_refusal(server: FakeLLMServer, sdk: str) -> None:
    server.queue(Refusal())
    result = outcome(endpoint(sdk, server.url))
    assert result.completion is not None and result.completion.status == "refused"


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("sdk", SDKS)
def test_a_refused_connection_is_named_transient_and_never_reached(sdk: str, stream: bool) -> None:
    port = free_port()
    result = outcome(endpoint(sdk, f"http://127.0.0.1:{port}", stream=stream), RetryPolicy(max_retries=1,
                                                                                          base_delay=0.01))
    assert result.error is not None and result.error.kind == "transient"
    assert result.error.message == f"connection refused: 127.0.0.1:{port}"
    assert result.error.code == "connection_refused" and not result.error.reached
    assert result.attempts == 2 and result.failed_usage == []   # nothing to bill, for either attempt
    assert result.retried_errors == [f"connection refused: 127.0.0.1:{port}"]


def test_a_name_that_does_not_resolve_is_a_dns_failure() -> None:
    result = outcome(endpoint("openai", "http://no-such-host.invalid"), RetryPolicy(max_retries=0))
    assert result.error is not None and result.error.code == "dns_failure" and not result.error.reached
    assert "no-such-host.invalid" in result.error.message and result.failed_usage == []


# --- the stage: the first refusal stops that endpoint; the items stay unanswered -----------------

class Breaking:
    """The deterministic endpoint of tests.conftest, whose ``model`` refuses every request from
    its ``after + 1``-th on (``reply``) until :attr:`fixed`; counts the requests that reach it."""

    def __init__(self, model: str, after: int, reply: Callable[[], Reply]) -> None:
        self.model, self.after, self.reply = model, after, reply
        self.fixed = False
        self.seen = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.model == self.model:
            self.seen += 1
            if not self.fixed and self.seen > self.after:
                return self.reply()
        return deterministic_responder(request)


def run_stages(params: dict[str, Any]) -> EndpointFailure | None:
    """generate, judge, aggregate as the notebooks call them; the endpoint failure that ended
    them, if one did."""
    run = evalnb.open_run(params)
    try:
        for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
            stage(run)
    except EndpointFailure as failure:
        return failure
    finally:
        run.close()
    return None


@pytest.fixture(scope="module")
def fault_free_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same run with nothing failing (its directory; its server is gone)."""
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        params = openai_params(tmp_path_factory.mktemp("fault-free"), server.url, concurrency=1, run_name="good")
        assert run_stages(params) is None
        return Path(params["output_dir"])


@pytest.fixture(scope="module")
def fault_free(fault_free_run: Path) -> tuple:
    """The numbers of the same run with nothing failing."""
    return numbers(fault_free_run)


ROLES = {"contestant": ("contestant-x", "generate", "model"), "judge": ("judge-2", "judge", "judge2")}
CASES = [(role, kind, 0) for role in ROLES for kind in (*ENDPOINT_ERROR_KINDS, "route")] + \
        [(role, kind, 5) for role in ROLES for kind in ("401", "quota")]


@pytest.mark.parametrize(("role", "kind", "after"), CASES, ids=lambda v: str(v))
def test_an_endpoint_failure_stops_its_calls_scores_nothing_and_the_fixed_rerun_equals_a_fault_free_run(
        tmp_path: Path, fault_free: tuple, role: str, kind: str, after: int) -> None:
    model, stage, record_role = ROLES[role]
    with FakeLLMServer() as server:
        breaking = Breaking(model, after, lambda: Error(404, "Not Found") if kind == "route"
                            else endpoint_error(kind, "openai"))
        server.responder = breaking
        params = openai_params(tmp_path, server.url, concurrency=1)
        failure = run_stages(params)
        run_dir = Path(params["output_dir"])

        assert failure is not None
        assert breaking.seen == after + 1   # not one request to that endpoint after its refusal
        line = str(failure)
        assert "\n" not in line
        assert f"the {stage} endpoint {record_role} (openai {model} at {server.url}/v1) refused the request: HTTP " \
               in line
        assert "nothing was scored" in line and "run the same command again to resume" in line
        assert not (run_dir / "status.json").exists() and not (run_dir / "scores.json").exists()
        kept = [r for r in read_lines(run_dir / f"{stage}.jsonl") if r["status"] == "failed_endpoint"]
        assert [r["endpoint"] for r in kept] == [record_role]
        assert kept[0]["error"]["kind"] == "endpoint" and kept[0]["attempts"] == 1
        every = [r for name in ("generate", "judge") for r in read_lines(run_dir / f"{name}.jsonl")]
        assert not [r for r in every if r["status"] == "failed_permanent"]
        if stage == "generate":   # the judges never saw a call
            assert server.count(model="judge-1") == 0
            responses = json.loads((run_dir / "responses.json").read_text())["records"]
            assert sum(r["status"] == "pending" for r in responses) == len(responses) - after
        else:   # the other judges of the panel finished their calls
            answered = sum(r["status"] == "ok" for r in read_lines(run_dir / "generate.jsonl"))
            assert server.count(model="judge-1") == server.count(model="judge-3") == answered

        breaking.fixed = True
        assert run_stages(params) is None
        assert json.loads((run_dir / "status.json").read_text())["state"] == "complete"
        assert numbers(run_dir) == fault_free


# --- a server that is down: named, transient, not billed ------------------------------------------

def test_a_refused_connection_is_resumable_named_and_not_billed_and_the_ceiling_is_unaffected_once_back(
        tmp_path: Path, fault_free: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_budget import priced, reported, spend_of

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    params = priced(openai_params(tmp_path, url, concurrency=1), 0.5)
    run_dir = Path(params["output_dir"])
    assert run_stages(params) is None   # transient: no endpoint failure, the stages go on
    records = [r for r in read_lines(run_dir / "generate.jsonl") if r["status"] != "out_of_context"]
    assert len(records) == 11 and {r["status"] for r in records} == {"failed_transient"}
    assert {r["error"]["message"] for r in records} == {f"connection refused: 127.0.0.1:{port}"}
    assert not [r for r in records if r.get("failed_attempt_usage")]   # no attempt reached the provider
    assert spend_of(run_dir)["spent_usd"] == 0 and not spend_of(run_dir).get("stopped")
    assert json.loads((run_dir / "status.json").read_text())["state"] == "incomplete"
    said = capsys.readouterr().err
    assert f"generate, model (openai contestant-x at {url}/v1): 11 calls failed" in said
    assert f"11 connection refused (failed_transient), e.g. connection refused: 127.0.0.1:{port}" in said
    assert "judge: the generate stage produced no answer" in said and "aggregate: the generate stage" in said
    assert incomplete_line(run_dir).startswith(
        f"resumable work remains: generate, model (openai contestant-x at {url}/v1): 11 connection refused")
    run = evalnb.open_run(params)   # the report's first output says the same
    rows = dict(evalnb.about(run, "report").rows)
    run.close()
    assert rows[f"failed: generate, model (openai contestant-x at {url}/v1)"] == (
        f"11 calls: 11 connection refused, e.g. connection refused: 127.0.0.1:{port}")
    assert rows["no answer"].startswith("the generate stage produced no answer")

    server = FakeLLMServer()
    server.port = port
    with server:   # the server is back: the same ceiling lets the whole run through
        server.responder = deterministic_responder
        assert run_stages(params) is None
    assert json.loads((run_dir / "status.json").read_text())["state"] == "complete"
    assert numbers(run_dir) == fault_free
    assert spend_of(run_dir)["spent_usd"] == pytest.approx(sum(map(reported, server.requests)))


# --- compare and suites refuse runs that did not run ----------------------------------------------

def test_compare_refuses_a_run_whose_items_failed_naming_it_and_its_cause(
        tmp_path: Path, fault_free_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.core.errors import ConfigError
    from evalnb.comparison.compare import open_compare
    from evalnb.comparison.leaderboard import leaderboard

    with FakeLLMServer() as server:
        # Every answer a bad request (an item-level 400): final, scored 0, the run "complete".
        server.responder = lambda r: (Error(400, "Invalid 'messages': unsupported content") if r.model == "contestant-x"
                                      else deterministic_responder(r))
        bad = openai_params(tmp_path / "bad", server.url, run_name="bad")
        assert run_stages(bad) is None
    bad_dir, good_dir = Path(bad["output_dir"]), fault_free_run
    assert json.loads((bad_dir / "status.json").read_text())["state"] == "complete"
    said = capsys.readouterr().err
    assert "aggregate: the generate stage produced no answer (model (openai contestant-x" in said
    with pytest.raises(ConfigError) as refused:   # `evalnb compare` prints it as its one line, exit 1
        open_compare([good_dir, bad_dir], tmp_path / "cmp")
    assert str(refused.value).startswith(
        f"{bad_dir}: 11 of 12 items ended in failure, mostly HTTP 400 from model (openai contestant-x at "
        f"{server.url}/v1), e.g. HTTP 400: Invalid 'messages'")
    assert "\n" not in str(refused.value) and "--max-failed" in str(refused.value)
    from evalnb.evidence.failures import run_did_not_run
    assert run_did_not_run(bad_dir) == str(refused.value)   # what a suite leaves off its leaderboard, and says
    assert run_did_not_run(good_dir) is None

    # A share the user admits: compared, its failures in the leaderboard's failed column.
    cmp = open_compare([good_dir, bad_dir], tmp_path / "cmp", max_failed=1.0)
    board = leaderboard(cmp).set_index("run")
    assert board.loc["bad", "failed"] == 11 and board.loc["good", "failed"] == 0
    assert board.loc["bad", "n"] == board.loc["good", "n"] == 12

    # An incomplete run is refused with what left it so.
    (bad_dir / "generate.jsonl").write_text("")
    assert run_stages(bad) is None   # nothing listens any more: every answer refused a connection
    with pytest.raises(ConfigError, match=r"incomplete \(resumable work remains: 11 connection refused from "
                                          r"model \(openai contestant-x"):
        open_compare([good_dir, bad_dir], tmp_path / "cmp")


def test_a_run_all_of_whose_items_failed_is_refused_whatever_the_threshold(tmp_path: Path) -> None:
    from evalnb.evidence.failures import did_not_run

    assert did_not_run(tmp_path, {"a": "failed_permanent", "b": "failed_permanent"}, max_failed=1.0)
    assert did_not_run(tmp_path, {"a": "failed_permanent", "b": "ok"}, max_failed=0.5) is None
    assert did_not_run(tmp_path, {"a": "failed_permanent", "b": "ok", "c": "failed_permanent"}, max_failed=0.5)
    assert did_not_run(tmp_path, {"a": "ok", "b": "refused"}) is None


# --- the command: exit 2 named, exit 1 the one line, then complete ---------------------------------

def test_evalnb_run_names_a_server_that_is_down_then_an_endpoint_failure_then_completes_once_fixed(
        tmp_path: Path, fault_free: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.app.main import main
    from tests.test_reliability import write_params

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    params = openai_params(tmp_path, url, concurrency=1)
    path, run_dir = write_params(tmp_path, params), Path(params["output_dir"])

    def said() -> list[str]:   # what the command said, without its progress lines
        return [line for line in capsys.readouterr().err.splitlines()
                if line.startswith("evalnb: ") and " -> " not in line]

    assert run_stages(params) is None   # nothing listens: transient, resumable (made here, without a kernel)
    capsys.readouterr()
    assert main(["run", str(path), "--stage", "aggregate"]) == 2   # exit 2, named
    assert said() == [f"evalnb: run incomplete: {run_dir}",
                      f"evalnb: resumable work remains: generate, model (openai contestant-x at {url}/v1): 11 "
                      f"connection refused (e.g. connection refused: 127.0.0.1:{port}); run the same command again "
                      "to resume"]

    server = FakeLLMServer()
    server.port = port
    with server:
        breaking = Breaking("contestant-x", 0, lambda: endpoint_error("401", "openai"))
        server.responder = breaking
        assert main(["run", str(path)]) == 1
        lines = said()
        assert len(lines) == 1 and breaking.seen == 1
        assert re.fullmatch(
            rf"evalnb: the generate endpoint model \(openai contestant-x at {re.escape(url)}/v1\) refused the request: "
            r"HTTP 401: Incorrect API key provided: sk-wr\*\*\*ng\. You can find your API key in your account "
            r"settings\. \[authentication\]\. Its calls were stopped and nothing was scored; 1[12] calls stay "
            r"unanswered\. Fix the endpoint \(its key, model name, URL or account\) and run the same command again "
            r"to resume\.", lines[0]), lines[0]
        # No stage ran after generate: no state (aggregate writes it), and scores still the first run's nulls.
        assert not (run_dir / "status.json").exists()
        assert json.loads((run_dir / "scores.json").read_text())["overall"] is None

        assert main(["status", str(run_dir)]) == 0
        status = capsys.readouterr().out
        assert f"generate, model (openai contestant-x at {url}/v1): 11 calls failed" in status
        assert "10 connection refused (failed_transient)" in status and "1 authentication (HTTP 401)" in status
        first = read_lines(run_dir / "generate.jsonl")[-1]["key"]   # the call the endpoint refused
        assert main(["show", str(run_dir), first]) == 0
        shown = capsys.readouterr().out
        assert f"generate {first} (model): failed_transient, 6 attempts; connection refused" in shown
        assert f"generate {first} (model): failed_endpoint, 1 attempt; authentication (HTTP 401): HTTP 401" in shown

        breaking.fixed = True
        assert main(["run", str(path)]) == 0
    assert said() == [f"evalnb: run complete: {run_dir}"]
    assert numbers(run_dir) == fault_free


# --- batch mode: a batch the endpoint refuses stops its batches ------------------------------------

def test_a_batch_the_endpoint_refuses_leaves_its_calls_unanswered_and_stops_its_batches(tmp_path: Path) -> None:
    from tests.fakebatch import FakeBatches
    from tests.test_batch import records, stage, wildtrace

    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        batches = FakeBatches(server)
        params = wildtrace(tmp_path, server, ("openai",) * 4, ("batch", "live", "live", "live"))
        params["model"]["batch"] = {"max_requests": 4}   # three batches' worth of calls
        server.unrouted = re.compile(r"^/v1/batches$")   # a gateway without the batch route
        with pytest.raises(EndpointFailure, match=r"the generate endpoint model \(openai contestant-x at .*\) "
                                                  r"refused the request: HTTP 404"):
            stage(params, "generate")
        assert server.unrouted_count == 1 and not batches.created   # the first refusal, then no other batch
        lines = records(tmp_path / "run", "generate")
        assert {r["status"] for r in lines.values() if r.get("batch")} == {"failed_endpoint"}
        assert JsonlStore(tmp_path / "run" / "generate.jsonl").load().keys() <= {
            k for k, r in lines.items() if r["status"] == "out_of_context"}   # every other item unanswered

        server.unrouted = None   # fixed: the same command submits, then collects
        stage(params, "generate")
        stage(params, "generate")
        answered = JsonlStore(tmp_path / "run" / "generate.jsonl").load()
        assert sum(r["status"] == "ok" for r in answered.values()) == 11
