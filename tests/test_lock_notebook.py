"""The run lock guards making calls and writing, not a kernel's life.

Two Jupyter kernels on one run directory, as two JupyterLab tabs would be: between stage
calls the directory is free, so the second tab's stages run; while the first tab's ``judge``
makes calls, the second is refused in one line (no traceback) naming that kernel, its
notebook and the stage; interrupted, the first lets go at once and writes nothing after.
Plus the one line every stage says about what it did, and file modes under two umasks."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from evalnb.records.stores import JsonlStore, current_umask
from evalnb.pipeline.stage_outcome import outcome_line
from tests.conftest import deterministic_responder, offline_params, openai_params
from tests.fakeserver import FakeLLMServer
from tests.test_reliability import wait_for

pytestmark = pytest.mark.slow


class Kernel:
    """A Jupyter kernel driven as a notebook tab drives it: cells sent, outputs collected."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        from jupyter_client.manager import KernelManager

        # Unix sockets, as evalnb's own kernels (no TCP warning in the test's output)
        self.manager = KernelManager(kernel_name="python3", transport="ipc", ip=str(cwd / f"kernel-{id(self)}"))
        self.manager.start_kernel(cwd=str(cwd), env=env, extra_arguments=["--HistoryManager.hist_file=:memory:"])
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=120)
        self.pending: dict[str, list[dict[str, Any]]] = {}

    def send(self, code: str) -> str:
        msg_id = str(self.client.execute(code))
        self.pending[msg_id] = []
        return msg_id

    def outputs(self, msg_id: str, timeout: float = 300) -> list[dict[str, Any]]:
        """Every output of the cell ``msg_id``, once it has finished."""
        deadline = time.monotonic() + timeout
        while True:
            msg = self.client.get_iopub_msg(timeout=max(1.0, deadline - time.monotonic()))
            parent = msg["parent_header"].get("msg_id")
            if parent not in self.pending:
                continue
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                if parent == msg_id:
                    return self.pending.pop(msg_id)
                continue
            if msg["msg_type"] in ("stream", "error", "display_data", "execute_result", "update_display_data"):
                self.pending[parent].append({"type": msg["msg_type"], **msg["content"]})

    def run(self, code: str) -> list[dict[str, Any]]:
        return self.outputs(self.send(code))

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def errors(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in outputs if o["type"] == "error"]


def printed(outputs: list[dict[str, Any]]) -> str:
    return "".join(o["text"] for o in outputs if o["type"] == "stream" and o["name"] == "stdout")


def test_two_kernels_share_a_run_directory_and_a_running_judge_refuses_the_second(tmp_path: Path) -> None:
    notebook = str(tmp_path / "notebooks" / "02_judge.ipynb")   # what jupyter-server tells a tab's kernel
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        params = openai_params(tmp_path, server.url)
        run_dir = Path(params["output_dir"])
        first, second = Kernel(tmp_path, {**env, "JPY_SESSION_NAME": notebook}), Kernel(tmp_path, env)
        try:
            opening = f"import evalnb\nrun = evalnb.open_run({params!r})\n"
            assert errors(first.run(opening + "evalnb.generate(run)")) == []
            # Between the first tab's stages nothing is held: the second tab's generate runs,
            # finds every answer recorded and says so.
            again = second.run(opening + "evalnb.generate(run)")
            assert errors(again) == []
            assert "generate: all 12 answers already recorded; no call made" in printed(again)
            answered = [r for r in json.loads((run_dir / "responses.json").read_text())["records"]
                        if r["status"] == "ok"]
            judge_calls = 3 * len(answered)

            server.latency = 1.0   # the judge stage takes seconds
            before = server.count()
            judging = first.send("evalnb.judge(run)")
            wait_for(lambda: server.count() > before, 120)
            refused = second.run("evalnb.judge(run)")
            [error] = errors(refused)
            assert error["ename"] == "RunLocked"
            assert len(error["traceback"]) == 1, error["traceback"]   # the one line, no traceback
            line = error["traceback"][0]
            assert line.startswith(f"RunLocked: {run_dir} is in use by a Jupyter kernel running evalnb.judge since ")
            assert re.search(r"since \d\d:\d\d, notebook " + re.escape(notebook) + r" \(pid \d+\); ", line), line
            assert "interrupt that kernel" in line
            # Reading needs no lock: the run opens and shows its summary while the judge runs.
            assert errors(second.run(f"evalnb.open_run({params!r}).summary()")) == []

            # Interrupted, the first tab's judge raises and lets go; nothing of it is written after.
            store = run_dir / "judge.jsonl"
            wait_for(lambda: store.exists() and store.read_text().count("\n") >= 1, 120)
            first.manager.interrupt_kernel()
            assert [e["ename"] for e in errors(first.outputs(judging))] == ["KeyboardInterrupt"]
            recorded = JsonlStore(run_dir / "judge.jsonl").load()
            done = sum(r["status"] == "ok" for r in recorded.values())
            assert 0 < len(recorded) < judge_calls
            server.latency = 0.0
            resumed = second.run("evalnb.judge(run)")
            assert errors(resumed) == []
            assert (f"judge: {done} of {judge_calls} judgements already recorded; "
                    f"{judge_calls - done} made now ({judge_calls - done} ok)") in printed(resumed)
            lines = (run_dir / "judge.jsonl").read_text().splitlines()
            assert len(lines) == len(recorded) + judge_calls - done   # no late record of the interrupted calls
        finally:
            first.close()
            second.close()


def test_the_stage_line_counts() -> None:
    assert outcome_line("generate", 12, {}) == "generate: all 12 answers already recorded; no call made"
    assert outcome_line("generate", 12, {"ok": 10, "empty": 1, "out_of_context": 1}) == \
        "generate: 12 answers made (10 ok, 1 empty, 1 out_of_context)"
    assert outcome_line("judge", 30, {"ok": 7, "failed_transient": 1}) == \
        "judge: 22 of 30 judgements already recorded; 8 made now (7 ok, 1 failed_transient)"
    assert outcome_line("judge", 30, {"ok": 4}, in_flight=20) == \
        "judge: 6 of 30 judgements already recorded; 4 made now (4 ok); 20 in batches in flight"
    assert outcome_line("judge", 30, {"ok": 10}, in_flight=20) == \
        "judge: 10 of 30 judgements made (10 ok); 20 in batches in flight"
    assert outcome_line("judge", 30, {}, in_flight=20) == \
        "judge: 10 of 30 judgements already recorded; none made now; 20 in batches in flight"
    assert outcome_line("judge", 0, {}) == "judge: no judgements to make"


# --- files follow the umask ---------------------------------------------------------------------

MODES_SCRIPT = """
import os, sys
os.umask(int(sys.argv[1], 8))
import evalnb
from evalnb.records.stores import current_umask
assert current_umask() == int(sys.argv[1], 8) and current_umask() == int(sys.argv[1], 8)
run = evalnb.open_run({params!r})
for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate, evalnb.score_histogram, evalnb.benchmark_figure):
    stage(run)
"""


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077], ids=oct)
def test_every_file_a_run_writes_follows_the_umask(tmp_path: Path, umask: int) -> None:
    """As any file a user's tool writes: 0666 less the umask (directories 0777 less it), the
    JSON records written through a temporary file included."""
    params = offline_params(tmp_path)
    script = tmp_path / "stages.py"
    script.write_text(MODES_SCRIPT.format(params=params))
    subprocess.run([sys.executable, str(script), oct(umask)[2:]], check=True, capture_output=True, timeout=300)
    run_dir = Path(params["output_dir"])
    files = {p.relative_to(run_dir).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in run_dir.rglob("*")}
    assert {"scores.json", "evidence.json", "tasks.html", "config.json", "generate.jsonl",
            "figures/score_histogram.png", "figures/score_histogram.pdf"} <= set(files)
    for name, mode in files.items():
        expected = (0o777 if (run_dir / name).is_dir() else 0o666) & ~umask
        assert mode == expected, f"{name}: {oct(mode)}, expected {oct(expected)}"


def test_reading_the_umask_leaves_it_as_it_was() -> None:
    mask = os.umask(0o027)
    try:
        assert current_umask() == 0o027 and current_umask() == 0o027
        assert os.umask(0o027) == 0o027
    finally:
        os.umask(mask)


HOLDER = """
import sys
import evalnb
evalnb.open_run({params!r}, hold_lock=True)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_killed_holder_frees_the_run_at_once(tmp_path: Path) -> None:
    import signal

    from evalnb.core.errors import EvalnbError
    from evalnb.pipeline.run import open_run
    from evalnb.pipeline.stages import generate

    params = offline_params(tmp_path)
    script = tmp_path / "hold.py"
    script.write_text(HOLDER.format(params=params))
    holder = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        run = open_run(params)   # reading: never refused
        with pytest.raises(EvalnbError, match=rf"in use by `hold.py` \(pid {holder.pid}, since "):
            generate(run)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
        generate(run)            # at once: the OS freed the lock with its holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate(timeout=60)
