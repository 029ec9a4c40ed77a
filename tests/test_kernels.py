"""One kernel per `evalnb run`: started once, reset to a new kernel's state before
each stage, so that each executed notebook is still a record that stands alone."""

from __future__ import annotations

import ast
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

from evalnb.app.runs.notebooks import notebook_for
from evalnb.core.types import STAGES
from evalnb.app.runs.kernels import also_import, fresh_namespace, start_run_kernel, stop_kernel
from tests.conftest import offline_params

EVALNB = Path(sys.executable).with_name("evalnb")


def execute(kernel: Any, code: str) -> dict[str, Any]:
    """Run ``code`` as a notebook cell would (history stored); the reply's content and the
    cell's text/plain result."""
    from jupyter_client.blocking import BlockingKernelClient

    client = BlockingKernelClient()
    client.load_connection_info(kernel.manager.get_connection_info())
    client.start_channels()
    try:
        msg_id = client.execute(code, store_history=True)
        result = None
        while True:
            msg = client.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "execute_result":
                result = msg["content"]["data"]["text/plain"]
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        reply = client.get_shell_msg(timeout=60)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = client.get_shell_msg(timeout=60)
        return {**reply["content"], "result": result}
    finally:
        client.stop_channels()


def test_a_reset_kernel_is_a_new_kernel_with_its_imports_kept(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    kernel = start_run_kernel(tmp_path)
    try:
        also_import(kernel, ["evalnb.providers.offline"])
        fresh_namespace(kernel, first)
        # No stage has had a reply, so the report's background import has not begun: nothing
        # imports behind a stage's back (two threads importing at once can leave a package
        # half-initialised).
        waiting = execute(kernel, "import sys, threading; ('evalnb.views.figures' in sys.modules, "
                                  "'evalnb-warm-up' in [t.name for t in threading.enumerate()])")
        assert ast.literal_eval(waiting["result"]) == (False, True)
        assert execute(kernel, "marker = 41; marker + 1")["result"] == "42"
        again = execute(kernel, "import os, sys; (os.getcwd(), 'evalnb.pipeline.stages' in sys.modules, "
                                "'pandas' in sys.modules, 'evalnb.providers.offline' in sys.modules)")
        assert again["execution_count"] == 3
        assert ast.literal_eval(again["result"]) == (str(first), True, True, True)

        # A stage's first reply starts it; the next reset returns only once it is over.
        execute(kernel, "__import__('evalnb.core.events').core.events.FIRST_REPLY.set()")
        fresh_namespace(kernel, second)
        done = execute(kernel, "('evalnb.views.figures' in __import__('sys').modules, "
                               "'evalnb-warm-up' in [t.name for t in __import__('threading').enumerate()])")
        assert ast.literal_eval(done["result"]) == (True, False)
        fresh_namespace(kernel, second)
        after = execute(kernel, "'marker' in globals(), 'Out' in globals() and len(Out), __import__('os').getcwd()")
        # Cells counted from 1 again; nothing an earlier stage bound, not even its outputs.
        assert after["execution_count"] == 1
        assert ast.literal_eval(after["result"]) == (False, 0, str(second))
        # What was imported stays imported: a stage does not pay for it again.
        assert execute(kernel, "'evalnb.pipeline.stages' in sys.modules")["status"] == "error"   # no name sys
        assert execute(kernel, "'evalnb.pipeline.stages' in __import__('sys').modules")["result"] == "True"
        # Reached through Unix sockets in a directory only this user may enter, not TCP.
        assert kernel.manager.get_connection_info()["transport"] == "ipc"
        assert stat.S_IMODE(kernel.sockets.stat().st_mode) == 0o700
        assert {p.parent for p in kernel.sockets.iterdir()} == {kernel.sockets}
    finally:
        stop_kernel(kernel)
    assert not kernel.manager.has_kernel and not kernel.sockets.exists()


def test_a_dead_kernel_is_reported_not_waited_for(tmp_path: Path) -> None:
    kernel = start_run_kernel(tmp_path)
    try:
        fresh_namespace(kernel, tmp_path)
        os.kill(kernel.manager.provisioner.pid, 9)
        with pytest.raises(RuntimeError, match="kernel died"):
            fresh_namespace(kernel, tmp_path)
    finally:
        stop_kernel(kernel)


def counting_kernels(root: Path, log: Path) -> dict[str, str]:
    """An environment in which every ipykernel process appends its pid to ``log`` as it starts:
    a ``sitecustomize`` on PYTHONPATH (the run's kernel is this interpreter's own ipykernel,
    whatever kernel spec Jupyter holds, so a kernel spec of the test's could not count it)."""
    root.mkdir(parents=True)
    (root / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if 'ipykernel_launcher' in sys.orig_argv:\n"
        f"    with open({str(log)!r}, 'a') as f:\n"
        "        f.write(f'{os.getpid()}\\n')\n", "utf-8")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}


def test_evalnb_run_starts_one_kernel_and_every_record_counts_its_cells_from_one(tmp_path: Path) -> None:
    log = tmp_path / "kernels.log"
    env = counting_kernels(tmp_path / "site", log)
    params = tmp_path / "params.json"
    params.write_text(json.dumps(offline_params(tmp_path)), "utf-8")
    done = subprocess.run([str(EVALNB), "run", str(params)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert len(log.read_text().split()) == 1   # four stages, one kernel

    run_dir = Path(offline_params(tmp_path)["output_dir"])
    for stage in STAGES:
        notebook = nbformat.read(run_dir / notebook_for(stage).name, as_version=4)
        counts = [c.execution_count for c in notebook.cells if c.cell_type == "code"]
        assert counts == list(range(1, len(counts) + 1)), stage
        assert not [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs
                    if o.output_type == "error"], stage

    # A second run of the same directory resumes in a kernel of its own, and makes no call.
    stored = {stage: (run_dir / f"{stage}.jsonl").read_text() for stage in ("generate", "judge")}
    again = subprocess.run([str(EVALNB), "run", str(params)], env=env, capture_output=True, text=True,
                           timeout=600)
    assert again.returncode == 0, again.stderr
    assert len(log.read_text().split()) == 2
    assert stored == {stage: (run_dir / f"{stage}.jsonl").read_text() for stage in stored}
