"""Stage kernels started ahead of their stage, so that ``evalnb run`` does not wait for them.

Each stage still runs in a fresh kernel of its own, so each executed notebook remains a
complete record that can be re-run alone. What changes is when the kernel starts: the
next stage's kernel is launched (and has imported what its notebook will import) while
the current stage runs. The warm-up binds no name in the kernel's namespace, and it first
asks the OS to end the kernel with evalnb (see :mod:`evalnb.lock`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WARM_UP = "__import__('evalnb.lock').lock.die_with_parent(); [__import__(m) for m in {modules!r}]"
# What each stage's notebook imports, by the functions its cells call.
STAGE_MODULES = {"generate": ("evalnb.pipeline", "pandas"), "judge": ("evalnb.pipeline", "pandas"),
                 "aggregate": ("evalnb.pipeline", "pandas"),
                 "report": ("evalnb.pipeline", "pandas", "evalnb.report", "matplotlib.figure")}
# The history file nbclient would give a kernel it started (no sqlite file per stage).
KERNEL_ARGUMENTS = ["--HistoryManager.hist_file=:memory:"]


@dataclass
class StageKernel:
    manager: Any   # AsyncKernelManager, handed to papermill (``km=``)
    warm_up: Any   # the client that sent the warm-up; kept open until the kernel has it


def start_kernel(cwd: Path, stage: str, extra_modules: Sequence[str] = ()) -> StageKernel:
    """A started kernel (``python3``) importing what ``stage`` needs (``extra_modules``: the
    provider SDKs its endpoints use)."""
    from jupyter_client.blocking import BlockingKernelClient
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.utils import run_sync

    manager = AsyncKernelManager(kernel_name="python3")
    run_sync(manager.start_kernel)(cwd=str(cwd), extra_arguments=KERNEL_ARGUMENTS)
    # Queued before the notebook's own requests, which the kernel answers after it. The
    # kernel binds its sockets a second or two from now: the client stays open until the
    # stage ends, or its socket would drop the queued request when closed.
    client = BlockingKernelClient()
    client.load_connection_info(manager.get_connection_info())
    client.start_channels(iopub=False, stdin=False, hb=False, control=False)
    modules = [*STAGE_MODULES.get(stage, ("evalnb",)), *extra_modules]
    client.execute(WARM_UP.format(modules=modules), silent=True, store_history=False)
    return StageKernel(manager, client)


def stop_kernel(kernel: StageKernel | None) -> None:
    from jupyter_core.utils import run_sync

    if kernel is None:
        return
    kernel.warm_up.stop_channels()
    if kernel.manager.has_kernel:
        run_sync(kernel.manager.shutdown_kernel)(now=True)
