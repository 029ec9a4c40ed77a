"""Endpoint failures in batch mode: one notion of "this endpoint has stopped" for the whole stage,
shared by its batches and its live calls (an endpoint's resends with ``batch: {resend: live}``,
its requests too large for a batch).

Through the real SDKs against tests/fakeserver.py and its batch APIs (tests/fakebatch.py), each
stage polling until its batches end (``evalnb run --wait``). What the fake received after the
first refusal (live requests, batches created) is counted where the fake answers it, so "nothing
more was sent" is read from the server, not from evalnb's records.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from evalnb.core.errors import EndpointFailure
from evalnb.records.stores import JsonlStore, read_lines
from evalnb.execution.batch import WAIT_ENV
from tests.conftest import deterministic_responder
from tests.fakebatch import FakeBatches
from tests.fakeserver import Error, FakeLLMServer, RecordedRequest, Reply, endpoint_error
from tests.test_batch import stage, wildtrace

CONTESTANT = "contestant-x"
REFUSED = r"the generate endpoint model \(openai contestant-x at .*\) refused the request: HTTP {}"


@pytest.fixture(autouse=True)
def waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each stage polls until its batches end, without pausing: a stop must hold across polls."""
    monkeypatch.setenv(WAIT_ENV, "0")


def contestant_in_batches(tmp_path: Path, server: FakeLLMServer, **batch: Any) -> dict[str, Any]:
    """WildTrace with the contestant in batch mode (``batch`` its options), the judges live."""
    params = wildtrace(tmp_path, server, ("openai",) * 4, ("batch", "live", "live", "live"))
    params["model"]["batch"] = batch
    params["model"]["concurrency"] = 1   # live calls one at a time: an exact count of what reached the fake
    return params


def generate_records(tmp_path: Path) -> list[dict[str, Any]]:
    return read_lines(tmp_path / "run" / "generate.jsonl")


class RevokedKey:
    """The contestant's batch API answers, but its key loses its live access meanwhile.

    The first two batched requests answered fail transiently (500), and the batches after the
    first to end are held, so that the stage goes on polling after the live resends. Live, the
    first call resent is busy (500 at every attempt: a live record, failed_transient, which a
    later pass would put into a new batch), every other one is refused (``endpoint_error``);
    the first refusal lets the held batches end. :attr:`after` counts the live requests to the
    contestant after that refusal, :attr:`batches_at_refusal` the batches created before it."""

    def __init__(self, batches: FakeBatches, refusal: str) -> None:
        self.batches, self.refusal = batches, refusal
        self.fixed = False
        self.transient_left = 2
        self.busy: str | None = None          # the prompt of the first call resent live
        self.batches_at_refusal: int | None = None
        self.after = 0

    def __call__(self, request: RecordedRequest) -> Reply:
        if request.model != CONTESTANT or self.fixed:
            return deterministic_responder(request)
        if any(request is r for r in self.batches.requests):   # answered inside a batch
            if self.transient_left:
                self.transient_left -= 1
                self.batches.hold = True   # the other batches stay in flight: more polls to come
                return Error(500, "internal")
            return deterministic_responder(request)
        if self.batches_at_refusal is not None:
            self.after += 1
        if self.busy in (None, request.prompt):
            self.busy = request.prompt
            return Error(500, "busy")
        if self.batches_at_refusal is None:
            self.batches_at_refusal = len(self.batches.created)
            self.batches.release()
        return endpoint_error(self.refusal, "openai")


@pytest.mark.parametrize("refusal", ["401", "quota"])
def test_a_live_resend_the_endpoint_refuses_stops_its_live_calls_and_its_batches_across_polls(
        server: FakeLLMServer, tmp_path: Path, refusal: str) -> None:
    batches = FakeBatches(server)
    revoked = RevokedKey(batches, refusal)
    server.responder = revoked
    params = contestant_in_batches(tmp_path, server, resend="live", max_requests=4)   # three batches
    status = {"401": "401", "quota": "429"}[refusal]
    with pytest.raises(EndpointFailure, match=REFUSED.format(status)):
        stage(params, "generate")

    assert revoked.batches_at_refusal == 3 and len(batches.created) == 3   # no batch after the refusal
    assert revoked.after == 0                                              # no live call after it
    assert all(b.state == "ended" for b in batches.created)               # those in flight were collected
    lines = generate_records(tmp_path)
    assert not [r for r in lines if r["status"] == "failed_permanent"]
    refused = [r for r in lines if r["status"] == "failed_endpoint"]
    assert len(refused) == 1 and "batch" not in refused[0] and refused[0]["attempts"] == 1
    assert refused[0]["error"]["kind"] == "endpoint"
    stored = JsonlStore(tmp_path / "run" / "generate.jsonl").load()
    assert refused[0]["key"] in stored and stored[refused[0]["key"]]["status"] == "failed_transient"   # pending
    assert sum(r["status"] == "ok" for r in stored.values()) == 9   # the two resent calls stay unanswered

    revoked.fixed = True   # the same command resumes: the busy call in a new batch, the refused one live
    stage(params, "generate")
    assert sum(r["status"] == "ok" for r in JsonlStore(tmp_path / "run" / "generate.jsonl").load().values()) == 11
    assert len(batches.created) == 4


def test_a_batch_the_endpoint_refuses_stops_the_live_calls_of_that_pass(server: FakeLLMServer,
                                                                         tmp_path: Path) -> None:
    """Requests too large for a batch are gathered to go live while the batches are filled;
    the refusal of the first batch stops them before one is sent."""
    server.responder = deterministic_responder
    batches = FakeBatches(server)
    # The two largest requests of the sample (over 5,300 bytes) are too large for such a batch.
    params = contestant_in_batches(tmp_path, server, max_bytes=5_200)
    server.unrouted = re.compile(r"^/v1/batches$")   # a gateway without the batch route
    with pytest.raises(EndpointFailure, match=REFUSED.format(404)):
        stage(params, "generate")
    assert server.unrouted_count == 1 and not batches.created
    assert server.count(model=CONTESTANT) == 0   # not one live call after the batch was refused
    assert {r["status"] for r in generate_records(tmp_path) if r.get("batch")} == {"failed_endpoint"}

    server.unrouted = None   # fixed: the large requests live, the others in batches
    stage(params, "generate")
    assert server.count(model=CONTESTANT) == 2
    assert sum(r["status"] == "ok" for r in JsonlStore(tmp_path / "run" / "generate.jsonl").load().values()) == 11


def test_a_batch_whose_requests_the_endpoint_refuses_stops_the_resends_of_that_pass(
        server: FakeLLMServer, tmp_path: Path) -> None:
    """An account exhausted while a batch ran: its requests come back refused (quota) beside a
    transient failure; that transient one is not resent live, nor is any other call."""
    answered = {"n": 0}

    def exhausted(request: RecordedRequest) -> Reply:
        if request.model != CONTESTANT:
            return deterministic_responder(request)
        answered["n"] += 1
        return Error(500, "internal") if answered["n"] == 1 else endpoint_error("quota", "openai")

    server.responder = exhausted
    batches = FakeBatches(server)
    params = contestant_in_batches(tmp_path, server, resend="live", max_requests=4)
    with pytest.raises(EndpointFailure, match=REFUSED.format(429)):
        stage(params, "generate")
    assert server.count(model=CONTESTANT) == 0 and len(batches.created) == 3   # no resend, live or batched
    statuses = [r["status"] for r in generate_records(tmp_path) if r.get("batch")]
    assert statuses.count("failed_transient") == 1 and statuses.count("failed_endpoint") == 10
