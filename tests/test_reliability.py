"""No reply, crash, bad input or second process may abort a stage, zero a task
silently, pay for a call twice, or leak a key."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from evalnb.app.main import main
from evalnb.pipeline.run import open_run
from evalnb.pipeline.stages import aggregate, generate, judge
from evalnb.records.stores import JsonlStore, write_json
from tests.conftest import SAMPLE, deterministic_responder, offline_params, openai_params
from tests.fakeserver import CutOff, Error, FakeLLMServer, Hang, Html, NotJson, Reset, Text, WrongShape

NO_RETRY = {"max_retries": 0, "base_delay": 0.01, "max_delay": 0.02, "retry_after_cap": 0.3}


def write_params(tmp_path: Path, params: dict[str, Any], name: str = "p.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(params))
    return path


def every_file_text(root: Path) -> str:
    return "\n".join(p.read_text("utf-8", "replace") for p in root.rglob("*") if p.is_file())


# --- a failure belongs to its call ------------------------------------------------------------

@pytest.mark.parametrize("fault", [NotJson(), CutOff(), Html(), WrongShape(), Reset()],
                         ids=lambda f: type(f).__name__)
def test_a_malformed_reply_is_resumable_and_the_stage_goes_on(tmp_path: Path, fault: Any) -> None:
    """One bad 200 fails only its own call, as failed_transient, never empty;
    every other call of the stage completes; the rerun redoes only that call."""
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        params = openai_params(tmp_path, server.url, retry=NO_RETRY)
        server.queue(fault, model="contestant-x")
        run = open_run(params)
        generate(run)
        records = JsonlStore(run.path("generate.jsonl")).load()
        failed = [r for r in records.values() if r["status"] == "failed_transient"]
        assert len(failed) == 1 and failed[0]["error"]["kind"] == "transient"
        assert not [r for r in records.values() if r["status"] == "empty"]
        judge(run)
        aggregate(run)
        status = json.loads(run.path("status.json").read_text())
        assert status["state"] == "incomplete"
        calls_before = server.count(model="contestant-x")
        generate(run)
        assert server.count(model="contestant-x") == calls_before + 1   # only the failed call again
        judge(run)
        aggregate(run)
        assert json.loads(run.path("status.json").read_text())["state"] == "complete"
        run.close()


def test_malformed_reply_keeps_the_start_of_the_body(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        server.queue(Html(), model="contestant-x")
        run = open_run(openai_params(tmp_path, server.url, retry=NO_RETRY))
        generate(run)
        failed = [r for r in JsonlStore(run.path("generate.jsonl")).load().values()
                  if r["status"] == "failed_transient"]
        assert "malformed reply" in failed[0]["error"]["message"]
        assert "<html" in failed[0]["error"]["message"].lower()
        run.close()


def test_an_exception_while_preparing_a_call_is_recorded_against_it(tmp_path: Path) -> None:
    """A document that vanishes after the checks: that call fails resumably, the others run."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in (SAMPLE / "corpus").iterdir():
        (corpus / f.name).write_bytes(f.read_bytes())
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        run = open_run(openai_params(tmp_path, server.url, corpus=str(corpus)))
        document = run.tasks[0].corpus_file   # type: ignore[attr-defined]
        victims = {t.task_id for t in run.tasks if t.corpus_file == document}   # type: ignore[attr-defined]
        (corpus / document).unlink()
        generate(run)
        records = JsonlStore(run.path("generate.jsonl")).load()
        for victim in victims:
            assert records[victim]["status"] == "failed_transient"
            assert "FileNotFoundError" in records[victim]["error"]["message"]
        others = [r for k, r in records.items() if k not in victims]
        assert len(others) == len(run.tasks) - len(victims) > 0
        assert all(r["status"] != "failed_transient" for r in others)
        run.close()


def test_cli_exits_2_not_1_when_a_reply_was_malformed(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        server.queue(NotJson(), model="judge-2")
        path = write_params(tmp_path, openai_params(tmp_path, server.url, retry=NO_RETRY))
        assert main(["run", str(path)]) == 2
        assert main(["run", str(path)]) == 0


# --- the store heals --------------------------------------------------------------------------

def test_a_complete_last_record_without_newline_is_kept_and_the_next_append_starts_fresh(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"key": "a", "status": "ok"}\n{"key": "b", "status": "ok"}')
    store = JsonlStore(path)
    store.append({"key": "c", "status": "ok"})
    store.close()
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == ["a", "b", "c"]
    assert set(JsonlStore(path).load()) == {"a", "b", "c"}


def test_a_torn_last_line_is_dropped_and_its_call_redone(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"key": "a", "status": "ok"}\n{"key": "b", "sta')
    assert set(JsonlStore(path).load()) == {"a"}
    assert path.read_text() == '{"key": "a", "status": "ok"}\n'
    path.write_text('{"key": "a", "status": "ok"}\n{"key": "b", "sta')
    store = JsonlStore(path)
    store.append({"key": "b", "status": "ok"})
    store.close()
    assert path.read_text().splitlines() == ['{"key": "a", "status": "ok"}', '{"key": "b", "status": "ok"}']


def test_a_corrupt_line_in_the_middle_names_file_and_line(tmp_path: Path) -> None:
    from evalnb.core.errors import DataError
    path = tmp_path / "s.jsonl"
    path.write_text('{"key": "a"}\nnot json\n{"key": "b"}\n')
    with pytest.raises(DataError, match=r"s\.jsonl, line 2"):
        JsonlStore(path).load()


def test_concurrent_json_writes_never_collide(tmp_path: Path) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(200):
                write_json(tmp_path / "x.json", {"writer": n, "i": i})
        except BaseException as e:   # noqa: BLE001 - collected for the assertion
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert json.loads((tmp_path / "x.json").read_text())["i"] == 199
    assert not list(tmp_path.glob(".x.json.*"))


# --- checks before anything is written ----------------------------------------------------------

def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evalnb.app.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def assert_refused(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("evalnb: error")]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_output_dir_through_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    path = write_params(tmp_path, offline_params(tmp_path, output_dir=str(tmp_path / "afile" / "run")))
    assert_refused(run_cli("run", str(path)), "output_dir", "afile", "is a file")


def test_data_path_that_is_a_directory(tmp_path: Path) -> None:
    params = offline_params(tmp_path, data=str(tmp_path))
    assert_refused(run_cli("run", str(write_params(tmp_path, params))), "data", "is a directory")
    assert not (tmp_path / "run").exists()


def test_corpus_that_is_a_file(tmp_path: Path) -> None:
    params = offline_params(tmp_path, corpus=str(SAMPLE / "tasks.json"))
    assert_refused(run_cli("run", str(write_params(tmp_path, params))), "corpus", "is a file")


def test_a_corpus_file_that_is_not_utf8_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in (SAMPLE / "corpus").iterdir():
        (corpus / f.name).write_bytes(f.read_bytes())
    victim = sorted(corpus.iterdir())[-1]
    victim.write_bytes(victim.read_bytes() + "é".encode("latin-1"))
    params = offline_params(tmp_path, corpus=str(corpus))
    result = run_cli("run", str(write_params(tmp_path, params)))
    assert_refused(result, victim.name, "not UTF-8", "corpus_file")
    assert not (tmp_path / "run").exists()


def test_a_failed_stage_prints_its_real_cause(tmp_path: Path) -> None:
    params = offline_params(tmp_path)
    path = write_params(tmp_path, params)
    run_dir = Path(params["output_dir"])
    run_dir.mkdir()
    # A corrupt record in the middle of a store is the user's to look at: the stage stops.
    (run_dir / "generate.jsonl").write_text('{"key": "x", "status": "ok"}\ngarbage\n{"key": "y"}\n')
    result = run_cli("run", str(path))
    assert result.returncode == 1
    line = [ln for ln in result.stderr.splitlines() if "generate stage failed" in ln][0]
    assert "DataError" in line and "generate.jsonl, line 2" in line and "record:" in line


# --- one process per run directory --------------------------------------------------------------

def test_a_second_run_on_a_held_directory_is_refused_naming_the_holder(tmp_path: Path) -> None:
    params = offline_params(tmp_path)
    path = write_params(tmp_path, params)
    run = open_run(params, hold_lock=True)   # this process now holds the directory, as evalnb run does
    try:
        result = run_cli("run", str(path))
        # named by its command line, as it was typed (pytest's own, here)
        assert_refused(result, "in use by", f"pid {os.getpid()}", " ".join(sys.argv[1:3]), "then try again")
    finally:
        run.close()
    assert run_cli("run", str(path)).returncode == 0


def test_a_stage_notebook_run_by_hand_is_refused_while_evalnb_runs(tmp_path: Path) -> None:
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from evalnb.app.runs.notebooks import notebook_for

    with FakeLLMServer(latency=0.5) as server:
        server.responder = deterministic_responder
        params = openai_params(tmp_path, server.url)
        path = write_params(tmp_path, params)
        process = subprocess.Popen([sys.executable, "-m", "evalnb.app.main", "run", str(path)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_for(lambda: server.count() > 0, 120)
            with pytest.raises(PapermillExecutionError, match="RunLocked"):
                papermill.execute_notebook(str(notebook_for("generate")), str(tmp_path / "by-hand.ipynb"),
                                           parameters={"config": params}, kernel_name="python3",
                                           progress_bar=False, start_timeout=120)
        finally:
            process.wait(timeout=300)
        assert process.returncode == 0
        # The record papermill saves shows the refusal as its one line, naming the command.
        import nbformat

        record = nbformat.read(tmp_path / "by-hand.ipynb", as_version=4)
        [error] = [o for c in record.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
        assert error.ename == "RunLocked" and len(error.traceback) == 1
        assert f"is in use by `evalnb run {path}` (pid {process.pid}, since " in error.traceback[0]
        assert "wait for it to finish, or stop it" in error.traceback[0]


def wait_for(condition: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:   # a zombie is dead for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def run_with_calls_in_flight(tmp_path: Path, server: FakeLLMServer
                             ) -> tuple[subprocess.Popen[str], Path, Path, int]:
    """``evalnb run`` in a subprocess, once its kernel has calls hanging at the server: the
    process (stderr piped), the parameters file, the run directory and the kernel's pid."""
    server.responder = lambda request: Hang(3)   # calls stay in flight
    params = openai_params(tmp_path, server.url)
    path = write_params(tmp_path, params)
    run_dir = Path(params["output_dir"])
    process = subprocess.Popen([sys.executable, "-m", "evalnb.app.main", "run", str(path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    kernel_lock = run_dir / ".evalnb.kernel.lock"
    wait_for(lambda: kernel_lock.exists() and kernel_lock.read_text().strip() != "" and server.count() > 0, 120)
    return process, path, run_dir, json.loads(kernel_lock.read_text())["pid"]


def test_killing_evalnb_stops_its_kernel_before_it_writes_again(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        process, path, run_dir, kernel = run_with_calls_in_flight(tmp_path, server)
        assert kernel != process.pid and alive(kernel)
        process.send_signal(signal.SIGKILL)   # evalnb alone: the kernel is in its own session
        process.wait()
        assert process.stderr is not None
        process.stderr.close()   # not read: the kernel, if alive, would hold it open
        wait_for(lambda: not alive(kernel), 5)
        time.sleep(4)   # past the point where the hung calls would have answered
        assert not (run_dir / "generate.jsonl").exists() or not (run_dir / "generate.jsonl").read_text()
        # A resume started right away is not refused and never overlaps the old kernel.
        server.responder = deterministic_responder
        assert run_cli("run", str(path)).returncode == 0


def test_a_kernel_that_dies_mid_stage_ends_the_run_with_its_cause_and_resumes(tmp_path: Path) -> None:
    """The run's one kernel killed while calls are in flight (an OOM kill, say): evalnb says so,
    exits 1 with the record named, and the same command resumes to a complete run."""
    with FakeLLMServer() as server:
        process, path, run_dir, kernel = run_with_calls_in_flight(tmp_path, server)
        os.kill(kernel, signal.SIGKILL)
        _, err = process.communicate(timeout=120)
        assert process.returncode == 1
        assert "generate stage did not finish: DeadKernelError" in err and "01_generate.ipynb" in err
        server.responder = deterministic_responder
        assert run_cli("run", str(path)).returncode == 0
        assert json.loads((run_dir / "status.json").read_text())["state"] == "complete"


# --- secrets by value ---------------------------------------------------------------------------

def test_a_key_of_an_unusual_shape_echoed_in_an_error_is_absent_from_every_file(tmp_path: Path) -> None:
    key = "xai-" + secrets.token_hex(12)   # no known key shape
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        server.queue(Error(400, f"invalid request from key {key}"), model="contestant-x")
        server.queue(Error(503, f"gateway token {key} rejected upstream"), model="judge-1")
        params = openai_params(tmp_path, server.url, retry=NO_RETRY)
        for endpoint in (params["model"], *params["judges"]):
            endpoint["api_key_env"] = "EVALNB_ODD_KEY"
        path = write_params(tmp_path, params)
        env = dict(os.environ, EVALNB_ODD_KEY=key)
        result = run_cli("run", str(path), env=env)
        assert result.returncode == 2, result.stderr
        assert key not in result.stderr + result.stdout
        assert server.requests[0].headers["authorization"] == f"Bearer {key}"   # it was used
        text = every_file_text(Path(params["output_dir"]))
        assert "[redacted]" in text
        assert key not in text


def test_the_command_provider_gets_a_minimal_environment(tmp_path: Path) -> None:
    from evalnb.core.run_config import EndpointConfig
    from evalnb.providers import make_provider
    from evalnb.providers.base import ChatRequest
    from evalnb.execution.runner import run_blocking

    script = tmp_path / "env.py"
    script.write_text(textwrap.dedent("""
        import json, os, sys
        sys.stdin.read()
        print(json.dumps(dict(os.environ)))
    """))
    os.environ["EVALNB_OTHER_ENDPOINT_KEY"] = "other-" + secrets.token_hex(8)
    os.environ["EVALNB_MY_KEY"] = "mine-" + secrets.token_hex(8)
    os.environ["EVALNB_MY_SETTING"] = "on"
    try:
        endpoint = EndpointConfig(provider="command", name="cmd", command=[sys.executable, str(script)],
                                  api_key_env="EVALNB_MY_KEY", env=["EVALNB_MY_SETTING"], concurrency=1)
        provider = make_provider(endpoint)
        assert provider is not None
        completion = run_blocking(lambda: provider.complete(ChatRequest("hi", 5)))
    finally:
        for name in ("EVALNB_OTHER_ENDPOINT_KEY", "EVALNB_MY_KEY", "EVALNB_MY_SETTING"):
            os.environ.pop(name)
    seen = json.loads(completion.text)
    assert "EVALNB_OTHER_ENDPOINT_KEY" not in seen
    assert seen["EVALNB_MY_KEY"].startswith("mine-") and seen["EVALNB_MY_SETTING"] == "on"
    assert seen["PATH"] == os.environ["PATH"] and seen["EVALNB_MAX_TOKENS"] == "5"
    allowed = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "SYSTEMROOT",
               "VIRTUAL_ENV", "PYTHONIOENCODING", "EVALNB_MY_KEY", "EVALNB_MY_SETTING"}
    unexpected = {k for k in seen if k not in allowed and not k.startswith(("LC_", "EVALNB_"))}
    # Python itself may add a variable or two on start-up; nothing of the parent's may leak.
    assert unexpected <= {"PWD"}, unexpected
    assert completion.model_route == f"command:{Path(sys.executable).name} env.py"


@pytest.mark.parametrize("style", ["too_long", "exceed_limit"])
def test_probe_window_reads_both_anthropic_context_wordings(tmp_path: Path, style: str) -> None:
    """A probe once aborted on "input length and `max_tokens` exceed context limit"."""
    with FakeLLMServer() as server:
        server.responder = lambda request: Text("OK")
        server.max_prompt_chars = 50_000
        server.context_style = style
        params = openai_params(tmp_path, server.url)
        params["model"] = {"provider": "anthropic", "name": "claude-x", "base_url": server.url}
        path = write_params(tmp_path, params)
        assert main(["probe-window", str(path)]) == 0
        record = json.loads((Path(params["output_dir"]) / "window_probe.json").read_text())
        sent = [len(r.prompt) for r in server.requests]
        accepted = max(n for n in sent if n <= 50_000)
        # The recorded cap is the longest document accepted: the prompt around it subtracted.
        overhead = accepted - record["caps"]["en"]
        assert 0 < overhead < 1000 and accepted > 50_000 * 0.99


def test_a_call_that_succeeded_after_retries_keeps_why(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        server.queue(Error(503, "upstream overloaded"), NotJson(), model="contestant-x")
        run = open_run(openai_params(tmp_path, server.url, concurrency=1))   # one call takes both
        generate(run)
        retried = [r for r in JsonlStore(run.path("generate.jsonl")).load().values() if r.get("retried_errors")]
        run.close()
    assert len(retried) == 1 and retried[0]["status"] == "ok" and retried[0]["attempts"] == 3
    first, second = retried[0]["retried_errors"]
    assert "503" in first and "upstream overloaded" in first
    assert "malformed reply" in second
