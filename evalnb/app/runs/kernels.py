"""One kernel per ``evalnb run``, started at launch and kept warm across the four stages.

A fresh kernel costs seconds before its first cell: the process (about 0.7 s) and what the
stage imports (pandas, and about 1.2 s for the ``openai`` SDK alone). ``evalnb run`` pays that
once: it starts the run's kernel before it checks the parameters, so the two overlap, and the
stages run in turn in that kernel.

Each executed notebook stays a complete record that can be re-run alone: before every stage
the kernel's namespace, output history and execution counter are reset
(IPython's ``reset(new_session=True)``), so the notebook starts as in a new kernel, with
cells numbered from 1, and sees nothing an earlier stage defined. What carries over is the
process and its imported modules, which no notebook can tell apart from importing them
itself. The warm-up binds no name in the namespace, and first asks the OS to end the kernel
with evalnb (see :mod:`evalnb.records.lock`).

The kernel is this interpreter's ipykernel (not whatever ``python3`` kernel spec Jupyter finds
first, which may be another environment's), started with ``-P`` (Python's safe path): neither
Python nor IPython puts the current directory on ``sys.path``, so a folder that holds a
directory named ``evalnb`` (the parent of a checkout) cannot shadow the evalnb that launched
the kernel. ``-P`` is a flag, not ``PYTHONSAFEPATH``: the processes the kernel starts (a
``command`` endpoint's script) keep Python's usual path. The kernel gets the ``PYTHONPATH``
the command was started with, relative entries resolved against the starting directory
(:func:`kernel_environment`): a plug-in importable where ``evalnb`` was started is importable
in its kernels.

One job, two sides: the functions at the end run inside the kernel (sent as code), the rest
start, reset and stop it; they change together, so they stay in one module.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.app.runs.engine import ENGINE, register_engine

# What the stage notebooks import before their first call, in order; then, in the background
# while the calls run, what only the report needs.
FIRST_MODULES = ("evalnb.pipeline.stages", "pandas")
LATER_MODULES = ("evalnb.pages.report", "evalnb.views.figures")
# The history file nbclient would give a kernel it started (no sqlite file per run).
KERNEL_ARGUMENTS = ["--HistoryManager.hist_file=:memory:"]
REPLY_TIMEOUT = 300.0   # seconds for a warm-up or reset reply (imports on a loaded machine)
KERNEL_ARGV = [sys.executable, "-P", "-m", "ipykernel_launcher", "-f", "{connection_file}"]


@dataclass
class RunKernel:
    manager: Any   # AsyncKernelManager, handed to papermill (``km=``) for every stage
    control: Any   # BlockingKernelClient: the warm-up and the reset before each stage
    sockets: Path  # the directory of its Unix sockets, removed with it
    client: Any = None   # AsyncKernelClient papermill executes the stages through, once connected


def start_run_kernel(cwd: Path, first: Sequence[str] = FIRST_MODULES,
                     later: Sequence[str] = LATER_MODULES) -> RunKernel:
    """A started ``python3`` kernel, already importing what the stages need first."""
    from jupyter_client.blocking import BlockingKernelClient
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.utils import run_sync

    # Unix sockets in a directory only this user can enter, not TCP on localhost: no other
    # local user can reach the kernel (ipykernel warns about plain TCP on every start).
    sockets = Path(tempfile.mkdtemp(prefix="evalnb-kernel-"))
    manager = AsyncKernelManager(kernel_name="python3", transport="ipc", ip=str(sockets / "socket"),
                                 kernel_spec_manager=_this_interpreter())
    run_sync(manager.start_kernel)(cwd=str(cwd), extra_arguments=KERNEL_ARGUMENTS,
                                   env=kernel_environment(os.environ, Path.cwd()))
    # Requests queue in the kernel until it binds its sockets; the client stays open for
    # the run (closing its socket would drop a request not yet delivered).
    control = BlockingKernelClient()
    control.load_connection_info(manager.get_connection_info())
    control.start_channels(iopub=False, stdin=False, hb=False, control=False)
    kernel = RunKernel(manager, control, sockets)
    _send(kernel, f"__import__('evalnb.app.runs.kernels').app.runs.kernels.warm_up({list(first)!r}, {list(later)!r})")
    return kernel


def kernel_environment(environ: Mapping[str, str], start: Path) -> dict[str, str]:
    """evalnb's environment for a kernel, its ``PYTHONPATH`` entries made absolute against
    ``start``, the directory the command was started in.

    The kernel runs in the run's directory, so a relative entry (``PYTHONPATH=.`` to run a
    plug-in from its own folder) would otherwise name another folder there. An empty entry
    (a stray ``:``), which Python reads as "the current directory", is dropped: the starting
    directory reaches the kernel only where ``PYTHONPATH`` names it, so a folder holding a
    directory named ``evalnb`` cannot shadow the installed package by accident."""
    env = dict(environ)
    entries = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e]
    if entries:
        env["PYTHONPATH"] = os.pathsep.join(str((start / Path(e).expanduser()).resolve()) for e in entries)
    else:
        env.pop("PYTHONPATH", None)
    return env


def _this_interpreter() -> Any:
    """Kernel specs that name one kernel: this interpreter's ipykernel, with ``-P``."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class ThisInterpreter(KernelSpecManager):   # type: ignore[misc]
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(argv=list(KERNEL_ARGV), name=kernel_name, language="python",
                              display_name="Python 3 (evalnb)")

    return ThisInterpreter()


def also_import(kernel: RunKernel, modules: Sequence[str]) -> None:
    """Queue more imports before the first stage (the endpoints' SDKs, once the parameters
    say which)."""
    _send(kernel, f"__import__('evalnb.app.runs.kernels').app.runs.kernels.load({list(modules)!r}, [])")


def fresh_namespace(kernel: RunKernel, cwd: Path) -> None:
    """Before a stage: the kernel as a new one would be, in ``cwd``; returns once it is."""
    import queue
    import time

    from jupyter_core.utils import run_sync

    msg_id = _send(kernel, f"__import__('evalnb.app.runs.kernels').app.runs.kernels.reset_in_kernel({str(cwd)!r})")
    deadline = time.monotonic() + REPLY_TIMEOUT
    while True:   # replies to the queued warm-up requests come first
        try:
            reply = kernel.control.get_shell_msg(timeout=1.0)
        except queue.Empty:
            if not run_sync(kernel.manager.is_alive)():
                raise RuntimeError("the run's kernel died before the stage started") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"the run's kernel did not answer within {REPLY_TIMEOUT:g} s") from None
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    content = reply["content"]
    if content.get("status") != "ok":
        raise RuntimeError(f"the run's kernel could not be reset: {content.get('ename')}: "
                           f"{content.get('evalue')}")


def execute_stage(kernel: RunKernel, notebook: Path, output: Path, parameters: dict[str, Any],
                  cwd: Path, parameters_file: Path | None = None) -> None:
    """``notebook`` executed by papermill into ``output`` in the run's kernel, reset first.

    papermill connects a new client to the kernel for every notebook and waits, each time, for
    the kernel's output channel to stay quiet for 0.2 s (jupyter_client's ``wait_for_ready``),
    about a quarter of a second per stage. The run's kernel keeps one connected client for
    all four, handed to papermill's own nbclient engine (:mod:`evalnb.app.runs.engine`)."""
    import papermill

    fresh_namespace(kernel, cwd)
    if kernel.client is None:
        from jupyter_core.utils import run_sync

        kernel.client = kernel.manager.client()
        kernel.client.start_channels()
        run_sync(_connected)(kernel.client)
    register_engine()
    try:   # papermill writes nothing itself: the engine writes the record whole (evalnb.app.runs.engine)
        papermill.execute_notebook(
            str(notebook), None, km=kernel.manager, kc=kernel.client, engine_name=ENGINE, record=str(output),
            parameters=parameters, kernel_name="python3", cwd=str(cwd), progress_bar=False,
            start_timeout=120, coalesce_streams=True)
    finally:
        if parameters_file is not None:
            name_parameters_file(output, parameters_file, cwd)


def name_parameters_file(record: Path, parameters_file: Path, cwd: Path) -> None:
    """The executed record's visible parameters cell names the run's own parameters file
    (relative to the record's folder, where its kernel ran), not the stored notebook's example
    default: the values that ran are in the injected cell below it."""
    import json
    import os

    import nbformat

    from evalnb.records.stores import write_text

    if not record.exists():
        return
    nb = nbformat.read(record, as_version=4)
    shown = os.path.relpath(parameters_file.resolve(), cwd.resolve())
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            if cell.source.startswith("config = "):
                cell.source = (f"config = {json.dumps(shown)}  # this run's parameters file; the values that ran\n"
                               "# are in the injected cell below")
                write_text(record, nbformat.writes(nb))
            return


async def _connected(client: Any) -> None:
    """Return once ``client`` hears the kernel on both channels: the reply to a kernel_info
    request on shell, then that request's status on IOPub (a subscription connects some time
    after it is made, and output published before then is lost). jupyter_client's
    ``wait_for_ready`` checks the same, then waits for 0.2 s of silence besides."""
    import queue
    import time

    deadline = time.monotonic() + REPLY_TIMEOUT
    while time.monotonic() < deadline:
        msg_id = client.kernel_info()
        try:
            while (await client.get_shell_msg(timeout=1.0))["parent_header"].get("msg_id") != msg_id:
                pass
            while (await client.get_iopub_msg(timeout=0.5))["parent_header"].get("msg_id") != msg_id:
                pass
            return
        except queue.Empty:   # not connected yet: ask again
            continue
    raise RuntimeError(f"the run's kernel did not answer within {REPLY_TIMEOUT:g} s")



def stop_kernel(kernel: RunKernel | None) -> None:
    """Stop the kernel and remove its sockets (again: nothing)."""
    from jupyter_core.utils import run_sync

    if kernel is None or not kernel.sockets.exists():
        return
    kernel.control.stop_channels()
    if kernel.client is not None:
        kernel.client.stop_channels()
    if kernel.manager.has_kernel:
        run_sync(kernel.manager.shutdown_kernel)(now=True)
    shutil.rmtree(kernel.sockets, ignore_errors=True)


def _send(kernel: RunKernel, code: str) -> str:
    return str(kernel.control.execute(code, silent=True, store_history=False))


# --- run inside the kernel ----------------------------------------------------------------------

def warm_up(first: Sequence[str], later: Sequence[str]) -> None:
    """In the kernel, before any stage: die with evalnb, then :func:`load`."""
    from evalnb.records.lock import die_with_parent

    die_with_parent()
    restore_pythonpath()
    load(first, later)


def restore_pythonpath() -> None:
    """In the kernel: every ``PYTHONPATH`` entry on ``sys.path``, first, in order. ipykernel's
    launcher deletes ``sys.path[0]`` when it is the current directory (taking it for the
    directory Python adds), which under ``-P`` is the first ``PYTHONPATH`` entry when the
    kernel starts in that folder: ``PYTHONPATH=.`` from a plug-in's own folder."""
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    missing = [e for e in entries if e not in sys.path]
    sys.path[:0] = missing


_later: list[threading.Thread] = []   # this kernel's background import, while it may run


def load(now: Sequence[str], later: Sequence[str]) -> None:
    """In the kernel: import ``now``; import ``later`` on a daemon thread once a stage has its
    first reply, so that it slows neither the first request nor, much, the calls. With
    ``evalnb.views.figures``, matplotlib's fonts and renderers are loaded too, by a throwaway drawing.

    Two threads importing at once can leave a package half-initialised (Python breaks an import
    deadlock that way), so the background import runs only while calls run, when nothing else
    imports (the SDK made its first-use imports before the first reply), and is over before
    the next stage starts: :func:`reset_in_kernel` waits for it. If no stage ever has a reply
    (a resumed run with nothing left to call), it never runs, and the report imports what it
    needs itself."""
    for module in now:
        importlib.import_module(module)
    if not later:
        return

    def load_later() -> None:
        from evalnb.core.events import FIRST_REPLY

        FIRST_REPLY.wait()
        for module in later:
            importlib.import_module(module)
        if "evalnb.views.figures" in later:
            from evalnb.views.figures import prepare_drawing
            prepare_drawing()

    _later.append(threading.Thread(target=load_later, name="evalnb-warm-up", daemon=True))
    _later[-1].start()


def reset_in_kernel(cwd: str) -> None:
    """In the kernel, between stages: the background import over if it has begun, then an
    empty namespace, no output history, cells counted from 1, in ``cwd``."""
    from IPython import get_ipython

    from evalnb.core.events import FIRST_REPLY

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("not in an IPython kernel")
    if _later and FIRST_REPLY.is_set():   # begun (no call runs now, so none can begin it)
        _later.pop().join()
    os.chdir(cwd)
    shell.reset(new_session=True)
