"""Pacing to provider rate limits."""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
from collections import deque
from pathlib import Path
import pytest

from evalnb.pipeline.accounting import estimate_tokens, minimum_run_minutes, quota_minutes
from evalnb.app.main import main
from evalnb.providers.pacing import Pacer, Quota, RateLimit, minimum_seconds, quota_from_headers
from evalnb.pipeline.run import open_run
from evalnb.pipeline.stages import generate
from evalnb.providers.base import ChatRequest, Completion, Usage
from evalnb.records.stores import JsonlStore
from tests.conftest import deterministic_responder, openai_params
from tests.fakeserver import Error, FakeLLMServer, RecordedRequest, Reply


class VirtualTime:
    """A clock that only moves when the pacer sleeps: pacing checked exactly, instantly."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def paced(limit: RateLimit) -> tuple[Pacer, VirtualTime]:
    t = VirtualTime()
    return Pacer(limit, "judge1", clock=t.clock, sleep=t.sleep), t


def request(chars: int, max_tokens: int = 100) -> ChatRequest:
    return ChatRequest("a" * chars, max_tokens)


def test_calls_wait_for_room_in_the_window() -> None:
    # 330 characters of English are 100 estimated tokens; 250 input tokens a minute fit two.
    pacer, t = paced(RateLimit(input_tokens_per_minute=250))

    async def go() -> list[float]:
        times = []
        for _ in range(5):
            await pacer.reserve(request(330))
            times.append(t.now)
        return times

    times = asyncio.run(go())
    start = times[0]
    # Two at once, the third when the first leaves the window (60 s + the safety margin), ...
    assert [round(x - start, 2) for x in times] == [0.0, 0.0, 60.25, 60.25, 120.5]


def test_a_waiting_call_goes_as_soon_as_a_reply_frees_room() -> None:
    """Estimates are high (3.3 characters a token); when a reply reports fewer tokens, the
    call waiting for room is sent then, not when the window has passed."""
    async def go() -> float:
        pacer = Pacer(RateLimit(input_tokens_per_minute=250))
        first = await pacer.reserve(request(330))      # 100 estimated
        second = await pacer.reserve(request(330))     # 200
        waiting = asyncio.create_task(pacer.reserve(request(330)))   # 300 > 250: waits
        await asyncio.sleep(0.05)
        assert not waiting.done() and pacer.waiting
        started = asyncio.get_running_loop().time()
        pacer.settle(first, Completion("x", "ok", usage=Usage(40, 1)), None)
        pacer.settle(second, Completion("x", "ok", usage=Usage(40, 1)), None)   # 80 used: room
        await waiting
        return asyncio.get_running_loop().time() - started

    assert asyncio.run(go()) < 30   # far less than the window it would otherwise have waited


def test_reported_usage_corrects_the_ledger() -> None:
    pacer, t = paced(RateLimit(input_tokens_per_minute=250, output_tokens_per_minute=1000))

    async def go() -> None:
        entry = await pacer.reserve(request(330, max_tokens=900))   # 900 output counted at budget
        # The reply says 10 output tokens: 990 of output budget are free again, so the next
        # call (another 900) goes at once instead of waiting a minute.
        pacer.settle(entry, Completion("x", "ok", usage=Usage(100, 10)), None)
        await pacer.reserve(request(330, max_tokens=900))

    asyncio.run(go())
    assert t.slept == []


def test_requests_per_minute() -> None:
    pacer, t = paced(RateLimit(requests_per_minute=3, window_seconds=10))

    async def go() -> None:
        for _ in range(7):
            await pacer.reserve(request(10))

    asyncio.run(go())
    assert sum(t.slept) == pytest.approx(2 * 10.25)   # 3 + 3 + 1: two waits of a window each


def test_an_oversized_request_waits_for_an_empty_window_and_warns(capsys: pytest.CaptureFixture[str]) -> None:
    pacer, t = paced(RateLimit(input_tokens_per_minute=100))

    async def go() -> None:
        await pacer.reserve(request(33))      # 10 tokens
        await pacer.reserve(request(3300))    # 1000 tokens: more than the whole budget
        await pacer.reserve(request(33))

    asyncio.run(go())
    assert "exceeds the whole per-minute budget" in capsys.readouterr().err
    assert pacer.oversized == 1
    assert t.slept == [pytest.approx(60.25), pytest.approx(60.25)]   # alone: before and after


def test_the_quota_a_reply_reports_is_followed() -> None:
    pacer, t = paced(RateLimit(input_tokens_per_minute=1_000_000))

    async def go() -> None:
        entry = await pacer.reserve(request(330))
        pacer.settle(entry, None, Quota({"input_tokens": 50.0}, reset_after=7.0))
        await pacer.reserve(request(330))   # needs 100 estimated tokens, only 50 left: wait for reset

    asyncio.run(go())
    assert t.slept == [pytest.approx(7.0)]


def test_quota_headers_of_both_providers() -> None:
    openai = quota_from_headers({"x-ratelimit-remaining-tokens": "5000", "x-ratelimit-reset-tokens": "1m30.5s",
                                 "x-ratelimit-remaining-requests": "9", "x-ratelimit-reset-requests": "20ms"})
    assert openai is not None
    assert openai.remaining == {"input_tokens": 5000.0, "requests": 9.0}
    assert openai.reset_after == pytest.approx(90.5)
    from datetime import datetime, timedelta, timezone
    reset = (datetime.now(timezone.utc) + timedelta(seconds=30)).isoformat().replace("+00:00", "Z")
    anthropic = quota_from_headers({"anthropic-ratelimit-input-tokens-remaining": "100",
                                    "anthropic-ratelimit-input-tokens-reset": reset,
                                    "anthropic-ratelimit-output-tokens-remaining": "7"})
    assert anthropic is not None
    assert anthropic.remaining == {"input_tokens": 100.0, "output_tokens": 7.0}
    assert 28 < anthropic.reset_after <= 30
    assert quota_from_headers({"content-type": "application/json"}) is None


def test_minimum_time_by_hand() -> None:
    limit = RateLimit(requests_per_minute=100, input_tokens_per_minute=1_000_000)
    # 3.5 million tokens: 1 million at once, and the next million each time the last one has
    # left the window: the fourth, last, half-full window opens after 3 minutes.
    assert minimum_seconds(limit, {"requests": 50, "input_tokens": 3_500_000}) == pytest.approx(180.0)
    # 450 requests at 100 a minute: five windows, the binding limit: 4 minutes.
    assert minimum_seconds(limit, {"requests": 450, "input_tokens": 10}) == pytest.approx(240.0)
    # Exactly two budgets: one window.
    assert minimum_seconds(limit, {"requests": 200}) == pytest.approx(60.0)
    row = {"stage": "generate", "to_make": 450, "est_input_tokens": 10, "max_output_tokens": 0}
    assert quota_minutes({"requests_per_minute": 100}, row) == pytest.approx(4.0)
    rows = [dict(row, min_minutes_under_rate_limit=3.5),
            {"stage": "judge", "min_minutes_under_rate_limit": 1.0},
            {"stage": "judge", "min_minutes_under_rate_limit": 2.0}]
    assert minimum_run_minutes(rows) == pytest.approx(5.5)   # stages in turn, judges side by side


class TokenWindow:
    """A server-side quota: input tokens (as the fake server counts them) per sliding window;
    a request over it gets 429, like a provider's."""

    def __init__(self, budget: int, window: float) -> None:
        self.budget, self.window = budget, window
        self.log: deque[tuple[float, int]] = deque()
        self.rejected = 0
        self.lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        tokens = max(1, len(req.prompt) // 4)
        with self.lock:
            while self.log and self.log[0][0] <= req.time - self.window:
                self.log.popleft()
            if sum(n for _, n in self.log) + tokens > self.budget:
                self.rejected += 1
                return Error(429, "tokens per minute exceeded")
            self.log.append((req.time, tokens))
        return deterministic_responder(req)


def test_a_paced_run_meets_a_token_window_without_a_429(tmp_path: Path) -> None:
    """Through the real SDK against a server that enforces the window; the same run unpaced
    is shown for comparison (it storms the quota)."""
    window = 2.0
    with FakeLLMServer() as server:
        quota = TokenWindow(budget=3000, window=window)
        server.responder = quota
        params = openai_params(tmp_path / "unpaced", server.url, retry={"max_retries": 0})
        run = open_run(params)
        generate(run)
        run.close()
        assert quota.rejected > 0   # without pacing the quota is stormed

    with FakeLLMServer() as server:
        quota = TokenWindow(budget=3000, window=window)
        server.responder = quota
        params = openai_params(tmp_path / "paced", server.url, retry={"max_retries": 0})
        params["model"]["rate_limit"] = {"input_tokens_per_minute": 3000, "window_seconds": window}
        run = open_run(params)
        generate(run)
        records = JsonlStore(run.path("generate.jsonl")).load()
        run.close()
        assert quota.rejected == 0
        assert all(r["status"] in ("ok", "out_of_context") for r in records.values())
        # Counted from the server's own log: no window ever held more than the budget.
        arrivals = [(r.time, max(1, len(r.prompt) // 4)) for r in server.requests]
        for t, _ in arrivals:
            assert sum(n for s, n in arrivals if t - window < s <= t) <= 3000


def test_estimate_shows_the_shortest_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = openai_params(tmp_path, "http://127.0.0.1:9")
    params["model"]["rate_limit"] = {"requests_per_minute": 2}
    (tmp_path / "p.json").write_text(json.dumps(params))
    assert main(["estimate", str(tmp_path / "p.json"), "--wide"]) == 0
    out = capsys.readouterr().out
    tasks = json.loads(Path(params["data"]).read_text())["tasks"]
    # Every in-scope task is one request; at 2 a minute, n requests take ceil(n/2) - 1 minutes.
    in_scope = [line for line in out.splitlines() if line.startswith("generate")]
    assert in_scope and "Shortest time under the configured rate limits" in out
    header = re.split(r"\s{2,}", out.splitlines()[0].strip())   # the vocabulary's headers hold spaces
    to_make = int(re.split(r"\s{2,}", in_scope[0].strip())[header.index("to make")])
    assert 0 < to_make <= len(tasks)
    assert f"{max(0, math.ceil(to_make / 2) - 1):g} minutes" in out


def test_estimate_tokens_match_the_spec() -> None:
    assert estimate_tokens("a" * 330) == pytest.approx(100)
    assert estimate_tokens("中" * 150) == pytest.approx(100)
