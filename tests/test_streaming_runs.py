"""Whole runs streamed and not: the same records and scores.json, the latency of
every call against the fake server's own timings, the report's latency table and the
estimate's measured figures, and a reasoning contestant behind a gateway."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.pipeline.accounting import estimate
from evalnb.config import EndpointConfig
from evalnb.providers import make_provider
from evalnb.providers.base import ChatRequest
from evalnb.records.stores import JsonlStore
from evalnb.providers.retry import RetryPolicy, call_with_retries
from tests.conftest import deterministic_responder, openai_params
from tests.fakeserver import Error, FakeLLMServer, RecordedRequest, Text
from tests.test_evidence import run_all
from tests.test_streaming import SDKS, endpoint

VOLATILE = ("started_at", "elapsed_s", "latency", "streamed", "request_id")   # transport and timing only


def reasoning_responder(request: RecordedRequest) -> Text:
    """The deterministic replies of the other tests, each with reasoning in the API's own field."""
    reply = deterministic_responder(request)
    return Text(reply.text, reasoning=f"Weighing the {len(request.prompt)} characters of the prompt first.")


def params_for(sdk: str, tmp_path: Path, url: str, name: str, **endpoint_keys: Any) -> dict[str, Any]:
    params = openai_params(tmp_path, url, output_dir=str(tmp_path / name))   # one run_name: runs compare whole
    base = f"{url}/v1" if sdk == "openai" else url
    for role in (params["model"], *params["judges"]):
        role.update(provider=sdk, base_url=base, **endpoint_keys)
    return params


def stored(run: evalnb.Run, stage: str) -> dict[str, dict[str, Any]]:
    return JsonlStore(run.path(f"{stage}.jsonl")).load()


def without(record: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in keys}


@pytest.mark.parametrize("sdk", SDKS)
def test_a_run_streamed_records_and_scores_what_it_does_unstreamed(server: FakeLLMServer, tmp_path: Path,
                                                                   sdk: str) -> None:
    server.responder = reasoning_responder
    plain = run_all(params_for(sdk, tmp_path, server.url, "plain", stream=False))
    plain_requests = len(server.requests)
    streamed = run_all(params_for(sdk, tmp_path, server.url, "streamed", stream=True))
    assert not any(r.streamed for r in server.requests[:plain_requests])
    assert all(r.streamed for r in server.requests[plain_requests:])
    assert len(server.requests) == 2 * plain_requests
    for stage in ("generate", "judge"):
        a, b = stored(plain, stage), stored(streamed, stage)
        assert a.keys() == b.keys() and a
        for key in a:
            assert without(a[key], VOLATILE) == without(b[key], VOLATILE), (stage, key)
            called = a[key]["attempts"] > 0
            assert b[key].get("streamed", False) == called and "streamed" not in a[key]
            if called:   # the rest (out of context) was decided without a call: no timing
                assert b[key]["latency"]["first_token_s"] is not None
                assert a[key]["reasoning"]["chars"] > 0 and a[key]["latency"]["first_token_s"] is None
    scores = [json.loads(run.path("scores.json").read_text()) for run in (plain, streamed)]
    assert scores[0]["fingerprint"] == scores[1]["fingerprint"]   # transport, not protocol
    assert without(scores[0], ("updated_at", "latency", "config")) == \
        without(scores[1], ("updated_at", "latency", "config"))
    assert scores[0]["all_tasks_overall"] is not None
    latency = [s["latency"] for s in scores]
    assert latency[0]["generate"]["contestant-x"]["streamed"] == 0
    assert latency[1]["generate"]["contestant-x"]["streamed"] == latency[1]["generate"]["contestant-x"]["calls"] > 0


def one_call(ep: EndpointConfig, request: ChatRequest):
    async def go():
        provider = make_provider(ep)
        try:
            return await call_with_retries(provider, request, RetryPolicy(max_retries=0), random.Random(0))
        finally:
            await provider.aclose()
    return asyncio.run(go())


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("stream", [True, False])
def test_latency_against_the_servers_own_timings(server: FakeLLMServer, sdk: str, stream: bool) -> None:
    """The client sends before the server sees the request and reads after the server sent,
    so each of its durations is at least the server's; the tolerances above are generous."""
    server.latency, server.token_rate = 0.2, 100   # 0.2 s to the first token, then 4 tokens per 0.04 s
    answer = "w" * 320                             # 80 tokens: 0.8 s of generation
    server.queue(Text(answer))
    completion = one_call(endpoint(sdk, server, stream=stream), ChatRequest("q", 64, 0.1)).completion
    (request,) = server.requests
    timing = request.timing
    served = timing.done_at - request.time
    latency = completion.latency
    assert served - 0.02 <= latency.total_s <= served + 1.0
    assert latency.total_s >= 0.2 + 320 / 4 / 100 - 0.05   # the server's own pacing, computed apart
    if not stream:
        assert latency.first_token_s is None and latency.output_tokens_per_s is None
        return
    first = timing.first_token_at - request.time
    assert first - 0.02 <= latency.first_token_s <= first + 0.5
    server_rate = completion.usage.output_tokens / (timing.done_at - timing.first_token_at)
    assert 0.5 * server_rate <= latency.output_tokens_per_s <= 2 * server_rate


def test_the_reports_latency_table_and_responses_json(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder, server.token_rate = deterministic_responder, 2000
    run = run_all(params_for("openai", tmp_path, server.url, "timed", stream=True))
    table = evalnb.latency_table(run)
    records = [r for r in stored(run, "generate").values() if r["attempts"]]
    row = table.loc[("generate", "contestant-x")]
    assert row["calls"] == row["streamed"] == len(records)
    for figure in ("total_s", "first_token_s", "output_tokens_per_s"):
        values = sorted(r["latency"][figure] for r in records if r["latency"][figure] is not None)
        assert row[f"{figure} median"] is not None and len(values) >= len(records) // 2
        assert row[f"{figure} median"] == pytest.approx(statistics.median(values), abs=1e-4)
        rank = 0.9 * (len(values) - 1)   # linear between order statistics
        low = int(rank)
        expected = values[low] + (values[min(low + 1, len(values) - 1)] - values[low]) * (rank - low)
        assert row[f"{figure} p90"] == pytest.approx(expected, abs=1e-4)
    judged = table.loc[[("judge", f"judge-{i}") for i in (1, 2, 3)]]
    assert (judged["calls"] > 0).all()
    answers = json.loads(run.path("responses.json").read_text())["records"]
    assert all(r["latency"]["total_s"] > 0 for r in answers if r.get("attempts"))


def test_the_estimate_uses_the_runs_measured_figures(server: FakeLLMServer, tmp_path: Path) -> None:
    server.responder = deterministic_responder
    params = params_for("openai", tmp_path, server.url, "measured")
    params["retry"] = {"max_retries": 0, "base_delay": 0.01, "max_delay": 0.02}
    server.queue(Error(503), Error(503), model="contestant-x")   # two tasks stay to be made
    run = evalnb.open_run(params)
    evalnb.generate(run)
    run.close()
    records = [r for r in stored(run, "generate").values() if r["attempts"]]
    done = [r for r in records if r["status"] != "failed_transient"]
    assert len(records) - len(done) == 2
    rows = {r["stage"]: r for r in estimate(run.config, run.benchmark, run.tasks, run.dir)}
    generate = rows["generate"]
    assert generate["to_make"] == 2 and generate["measured_calls"] == len(done)
    median = statistics.median(r["latency"]["total_s"] for r in done)
    assert generate["measured_median_s"] == pytest.approx(median, abs=1e-3)
    assert generate["est_minutes_measured"] == pytest.approx(2 * median / 4 / 60, abs=0.01)
    mean_out = statistics.fmean(r["usage"]["output_tokens"] for r in done)
    assert generate["est_output_tokens_measured"] == round(2 * mean_out)
    assert rows["judge"]["measured_calls"] == 0 and rows["judge"]["est_minutes_measured"] is None


def test_a_reasoning_contestant_behind_a_gateway_is_streamed_by_default(server: FakeLLMServer,
                                                                       tmp_path: Path) -> None:
    """A 32,768-token reasoning model answering slowly behind a 1 s idle limit: `auto`
    streams it and every task is answered; forced off, every attempt ends in the 504."""
    server.token_rate, server.gateway_timeout = 30, 1.0

    def slow(request: RecordedRequest) -> Text:
        reply = deterministic_responder(request)
        return reply if request.prompt.startswith("STRICT grader.") else \
            Text(reply.text, reasoning="step by step " * 12)   # 1.3 s and more to generate
    server.responder = slow
    for name, keys in (("auto", {}), ("off", {"stream": False})):
        params = params_for("openai", tmp_path, server.url, name)
        params["model"].update(reasoning=True, **keys)
        params["retry"] = {"max_retries": 1, "base_delay": 0.01, "max_delay": 0.02}
        run = evalnb.open_run(params)
        evalnb.generate(run)
        run.close()
        called = [r for r in stored(run, "generate").values() if r["attempts"]]
        assert called
        statuses = {r["status"] for r in called}
        if name == "auto":
            assert statuses == {"ok"} and all(r["streamed"] for r in called)
        else:
            assert statuses == {"failed_transient"}
            assert all(r["error"]["status_code"] == 504 and r["attempts"] == 2 for r in called)
