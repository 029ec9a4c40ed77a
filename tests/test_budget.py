"""The spending ceiling, through the real SDK against the local server.

Expected spend is computed here from what the server saw and reported (its request bodies and
the usage in the replies it sent), at the prices of the parameters; upper bounds from the
request texts by the protocol's figures (3.3 characters a token, 1.5 for CJK text) and the
``max_tokens`` each request carried.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.app.main import main
from evalnb.core.errors import ConfigError
from tests.conftest import deterministic_responder, openai_params
from tests.fakeserver import Error, FakeLLMServer, Hang, RecordedRequest, Reply, Reset
from tests.test_reliability import wait_for, write_params
from tests.test_resume_kill import numbers

MODELS = ("contestant-x", "judge-1", "judge-2", "judge-3")
PRICE = 10.0   # dollars per million tokens, input and output alike: round numbers to check by hand


def priced(params: dict[str, Any], ceiling: float | None) -> dict[str, Any]:
    params["prices"] = {m: {"input": PRICE, "output": PRICE} for m in MODELS}
    if ceiling is not None:
        params["budget"] = {"max_cost_usd": ceiling}
    return params


def is_cjk(text: str) -> bool:
    return sum(1 for c in text[:4000] if "\u4e00" <= c <= "\u9fff") > 20


def upper_bound(request: RecordedRequest) -> float:
    """The request's estimated input and whole output budget, at the price."""
    tokens_in = len(request.prompt) / (1.5 if is_cjk(request.prompt) else 3.3)
    tokens_out = request.body.get("max_tokens") or request.body.get("max_completion_tokens")
    return (tokens_in + tokens_out) * PRICE / 1e6


def reported(request: RecordedRequest) -> float:
    """What the server's reply said the call used (nothing for an error or a cut reply)."""
    try:
        usage = json.loads(request.response)["usage"]
    except (ValueError, KeyError):
        return 0.0
    return (usage["prompt_tokens"] + usage["completion_tokens"]) * PRICE / 1e6


def spend_of(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "scores.json").read_text())["budget"]["ceilings"][0]


def test_an_unpriced_model_under_a_budget_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                               ) -> None:
    params = priced(openai_params(tmp_path, "http://127.0.0.1:9"), 1.0)
    del params["prices"]["judge-2"]
    with pytest.raises(ConfigError, match=r"prices: judges\[1\] model 'judge-2' has no price"):
        evalnb.open_run(params)
    assert not Path(params["output_dir"]).exists()
    path = write_params(tmp_path, params)
    assert main(["estimate", str(path)]) == 1
    assert "'judge-2' has no price" in capsys.readouterr().err
    # Offline baselines and command endpoints cost nothing unless priced; no budget, no rule.
    offline = openai_params(tmp_path / "offline", "http://127.0.0.1:9")
    offline["model"] = {"provider": "offline", "name": "extractive-bm25"}
    offline["judges"] = [{"provider": "offline", "name": "rubric-overlap"}] * 3
    offline["budget"] = {"max_cost_usd": 0}
    evalnb.open_run(offline).close()
    del params["budget"]
    evalnb.open_run(params).close()


def test_the_run_stops_before_the_ceiling_and_raising_it_completes_it(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """One call at a time, so the order is the server's: each call was sent only when what the
    earlier ones cost plus its own upper bound fitted the ceiling; the first call not sent would
    not have; raising the ceiling finishes the run with the numbers of an unbounded one."""
    ceiling = 0.3
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        unbounded = priced(openai_params(tmp_path / "unbounded", server.url, concurrency=1), None)
        run = evalnb.open_run(unbounded)
        for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
            stage(run)
        run.close()
        server.reset()
        server.responder = deterministic_responder

        # cache: false: the bounded run pays for its calls (answers reused from the unbounded run
        # would cost nothing, tests/test_cache.py).
        params = priced(openai_params(tmp_path / "bounded", server.url, concurrency=1, cache=False), ceiling)
        run = evalnb.open_run(params)
        for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
            stage(run)
        run.close()
        sent = list(server.requests)
        spent = 0.0
        for request in sent:
            assert spent + upper_bound(request) <= ceiling + 1e-9
            spent += reported(request)
        budget = spend_of(run.dir)
        assert budget["spent_usd"] == pytest.approx(spent)
        assert budget["stopped"] and "raise budget.max_cost_usd" in budget["stopped"]
        assert json.loads(run.path("status.json").read_text())["state"] == "incomplete"
        assert 11 < len(sent) < 11 + 33   # every answer, some verdicts: the ceiling fell in the judge stage
        capsys.readouterr()
        assert main(["status", str(run.dir)]) == 0
        assert f"budget (run): ${spent:.4f} spent of ${ceiling:.4f}; last stopped" in capsys.readouterr().out

        server.reset()
        server.responder = deterministic_responder
        params["budget"] = {"max_cost_usd": 100.0}   # not part of the fingerprint
        run = evalnb.open_run(params)
        for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
            stage(run)
        run.close()
        # The first call the ceiling held back would not have fitted it.
        assert spent + upper_bound(server.requests[0]) > ceiling
        assert numbers(run.dir) == numbers(Path(unbounded["output_dir"]))
        assert spend_of(run.dir)["spent_usd"] == pytest.approx(spent + sum(map(reported, server.requests)))
        manifest = json.loads(run.path("manifest.json").read_text())
        assert manifest["budget"]["ceilings"][0]["max_cost_usd"] == 100.0


def test_failed_attempts_are_counted(tmp_path: Path) -> None:
    """A retry's earlier attempts count too: an HTTP error is not billed; a reply cut off in
    the middle may have been, so it counts at its upper bound (nothing reported it)."""
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        server.queue(Reset(), Error(500), Error(429))
        params = priced(openai_params(tmp_path, server.url, concurrency=1), 100.0)
        run = evalnb.open_run(params)
        evalnb.generate(run)
        evalnb.aggregate(run)
        run.close()
        first = json.loads(run.path("generate.jsonl").read_text().splitlines()[0])
        assert first["attempts"] == 4 and len(first["retried_errors"]) == 3
        cut = server.requests[0]
        assert first["failed_attempt_usage"] == [
            {"input_tokens": round(len(cut.prompt) / 3.3), "output_tokens": 8192,
             "basis": "upper bound (no reply to say otherwise)"}]
        bound_of_cut = (round(len(cut.prompt) / 3.3) + 8192) * PRICE / 1e6
        expected = bound_of_cut + sum(map(reported, server.requests))
        assert spend_of(run.dir)["spent_usd"] == pytest.approx(expected)


def answer_then_hang(answered: int) -> Any:
    count = {"n": 0}

    def responder(request: RecordedRequest) -> Reply:
        count["n"] += 1
        return deterministic_responder(request) if count["n"] <= answered else Hang(30)
    return responder


@pytest.mark.slow
def test_a_killed_run_remembers_its_spend_exits_2_then_0_when_raised(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Killed with calls in flight: what its records say and what was in flight (in doubt, at
    its upper bound) are both remembered; the resume stops at the ceiling (exit 2, one line);
    raised on the command line, the same command completes with an unbounded run's numbers."""
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        reference = priced(openai_params(tmp_path / "reference", server.url), None)
        run = evalnb.open_run(reference)
        for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):
            stage(run)
        run.close()
        server.reset()

        server.responder = answer_then_hang(4)
        params = priced(openai_params(tmp_path / "bounded", server.url, cache=False), 0.55)   # pays for its calls
        path = write_params(tmp_path, params)
        run_dir = Path(params["output_dir"])
        process = subprocess.Popen([sys.executable, "-m", "evalnb.app.main", "run", str(path)],
                                   start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        store = run_dir / "generate.jsonl"
        wait_for(lambda: store.exists() and len(store.read_text().splitlines()) >= 4 and server.count() >= 6, 120)

        def reserved_reached_the_server() -> bool:
            # A call is reserved in spend.json before it is sent: kill only once every reserved
            # call has reached the server, so that what was in flight is what the server saw.
            try:
                holds = json.loads((run_dir / "spend.json").read_text()).get("held", {}).values()
            except (OSError, ValueError):
                return False
            held = sum(h["usd"] for h in holds if h["run"] == str(run_dir))
            return bool(math.isclose(held, sum(map(upper_bound, list(server.requests)[4:])), rel_tol=1e-9))
        wait_for(reserved_reached_the_server, 60)
        import os
        os.killpg(process.pid, signal.SIGKILL)   # the command, papermill and the kernel at once
        process.wait()
        time.sleep(0.5)
        first = list(server.requests)
        answered, in_flight = first[:4], first[4:]
        remembered = sum(map(reported, answered)) + sum(map(upper_bound, in_flight))

        server.reset()
        server.responder = deterministic_responder
        capsys.readouterr()
        assert main(["run", str(path)]) == 2
        err = capsys.readouterr().err
        assert "spending ceiling of run t reached" in err and "in doubt" in err and "raise budget.max_cost_usd" in err
        ledger = json.loads((run_dir / "spend.json").read_text())
        assert ledger["runs"][str(run_dir)]["in_doubt_usd"] == pytest.approx(sum(map(upper_bound, in_flight)))
        # Nothing sent that the ceiling did not allow, counting what the killed run had spent.
        total = remembered
        for request in server.requests:
            assert total + upper_bound(request) <= 0.55 + 1e-9
            total += reported(request)
        assert total <= 0.55

        assert main(["run", str(path), "--set", "budget.max_cost_usd=50"]) == 0
        assert numbers(run_dir) == numbers(Path(reference["output_dir"]))
        assert math.isclose(spend_of(run_dir)["max_cost_usd"], 50)


def test_batches_are_reserved_at_the_batch_price_until_collected(tmp_path: Path) -> None:
    """Batch mode: each call reserved at half the price when it goes into a batch, the batch's
    reservation kept in its journal while it is in flight; collected, it is spent at the batch
    price; what no longer fits is never submitted and stays resumable."""
    from evalnb.execution.batch import WAIT_ENV
    from evalnb.execution.batch.journal import read_only
    from tests.fakebatch import FakeBatches

    ceiling = 0.08   # a call may cost up to about $0.047 at the batch price, and costs about $0.005
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        batches = FakeBatches(server)
        params = priced(openai_params(tmp_path, server.url), ceiling)
        params["model"]["mode"] = "batch"
        params["judges"] = [{"provider": "offline", "name": "rubric-overlap"}] * 3   # free
        import os
        os.environ[WAIT_ENV] = "0"   # poll until every batch has ended, without pausing
        try:
            run = evalnb.open_run(params)
            evalnb.generate(run)
            evalnb.aggregate(run)
            run.close()
        finally:
            del os.environ[WAIT_ENV]
        entries = read_only(run.dir)
        assert entries and all(e["state"] == "collected" for e in entries)
        assert len(batches.created) == len(entries) > 1
        spent = 0.0
        for entry, batch in zip(entries, batches.created):   # in submission order
            half = [upper_bound(request) / 2 for _, request in batch.items]
            assert entry["reserved_usd"] == pytest.approx(sum(half))
            assert spent + sum(half) <= ceiling + 1e-9   # each batch fitted what was spent before it
            for result in batch.results:
                usage = result["response"]["body"]["usage"]
                spent += (usage["prompt_tokens"] + usage["completion_tokens"]) * PRICE / 2 / 1e6
        assert len(batches.requests) < 11   # the ceiling held some calls back
        assert spend_of(run.dir)["spent_usd"] == pytest.approx(spent)
        assert spend_of(run.dir)["stopped"] is not None
        assert json.loads(run.path("status.json").read_text())["state"] == "incomplete"
