"""One process per run directory.

Whoever makes a run's calls holds an exclusive OS file lock (``flock``) on
``.evalnb.core.lock`` in the run directory: ``evalnb run`` for the whole command, a notebook
opened by hand in JupyterLab for the life of its kernel, a script for the life of its
process. The OS frees the lock the moment its holder dies, so a killed run never blocks a
resume, and a second run is refused at once, naming the holder.

A stage kernel that ``evalnb run`` starts cannot take the lock its parent holds. It is let
in on two conditions: the token the parent wrote into the lock file was handed to it in
the environment, and the holder is its own parent process. It then asks the OS to kill it
when that parent dies (``PR_SET_PDEATHSIG``: jupyter_client starts kernels in a session of
their own, so a kill of evalnb's process group misses them) and holds ``.evalnb.kernel.lock``
until it exits; a new holder of the run lock waits for that lock too, so a resume started
right after a kill never overlaps the old kernel.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from evalnb.core.errors import EvalnbError

LOCK_NAME = ".evalnb.core.lock"
KERNEL_LOCK_NAME = ".evalnb.kernel.lock"
TOKEN_ENV = "EVALNB_RUN_LOCK_TOKEN"
KERNEL_EXIT_WAIT = 10.0   # seconds a new holder waits for a dying kernel of an old run


class RunLocked(EvalnbError):
    """Another process is running this run directory."""


@dataclass
class RunLock:
    dir: Path
    token: str
    file: IO[str] | None   # None for a stage kernel let in under its parent's lock

    def release(self) -> None:
        _held.pop(self.dir, None)
        if self.file is not None:
            self.file.close()   # closing the descriptor frees the flock
            self.file = None


_held: dict[Path, RunLock] = {}


def acquire(run_dir: Path) -> RunLock:
    """Hold the run directory (idempotent within a process); RunLocked if another has it."""
    import fcntl

    run_dir = run_dir.resolve()
    if run_dir in _held:
        return _held[run_dir]
    run_dir.mkdir(parents=True, exist_ok=True)
    handle = (run_dir / LOCK_NAME).open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _read_holder(handle)
        handle.close()
        if _is_parent_stage_kernel(holder):
            return _enter_as_stage_kernel(run_dir, holder)
        raise RunLocked(f"{run_dir} is in use by {describe(holder)}; wait for it to finish, "
                        "or stop it, before running this directory again") from None
    try:
        _wait_for_old_kernel(run_dir)
    except RunLocked:
        handle.close()
        raise
    # evalnb run draws the token before it starts its kernel, which then boots while the
    # parameters are checked; any other holder draws one here.
    lock = RunLock(run_dir, os.environ.get(TOKEN_ENV) or secrets.token_hex(16), handle)
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "token": lock.token,
                             "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                             "command": " ".join(sys.argv[:3])}) + "\n")
    handle.flush()
    _held[run_dir] = lock
    return lock


def is_stage_kernel(run_dir: Path) -> bool:
    """True in a stage kernel that ``evalnb run`` started on this directory (reads only)."""
    if not os.environ.get(TOKEN_ENV):
        return False
    try:
        with (run_dir.resolve() / LOCK_NAME).open(encoding="utf-8") as handle:
            return _is_parent_stage_kernel(_read_holder(handle))
    except OSError:
        return False


def release_all() -> None:
    for lock in list(_held.values()):
        lock.release()


def describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process"
    return (f"pid {holder.get('pid')} on {holder.get('host')} "
            f"(since {holder.get('since')}: {holder.get('command') or 'a notebook'})")


def _read_holder(handle: IO[str]) -> dict[str, Any]:
    if handle.seekable():
        handle.seek(0)
    try:
        holder = json.loads(handle.read() or "{}")
    except json.JSONDecodeError:
        return {}
    return holder if isinstance(holder, dict) else {}


def _is_parent_stage_kernel(holder: dict[str, Any]) -> bool:
    token = os.environ.get(TOKEN_ENV)
    return bool(token) and holder.get("token") == token and holder.get("pid") == os.getppid()


def _enter_as_stage_kernel(run_dir: Path, holder: dict[str, Any]) -> RunLock:
    die_with_parent()
    if os.getppid() != holder.get("pid"):   # the parent died before the request took effect
        os._exit(1)
    if run_dir not in _kernel_handles:   # else: the run's kernel, entering for its next stage
        _hold_kernel_lock(run_dir, holder)
    lock = RunLock(run_dir, str(holder["token"]), None)
    _held[run_dir] = lock
    return lock


def _hold_kernel_lock(run_dir: Path, holder: dict[str, Any]) -> None:
    import fcntl

    handle = (run_dir / KERNEL_LOCK_NAME).open("a+", encoding="utf-8")
    fcntl.flock(handle, fcntl.LOCK_EX)   # an earlier run's kernel may still be closing
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "parent": holder.get("pid")}) + "\n")
    handle.flush()
    # The kernel lock is held by this open descriptor until the kernel exits (a second
    # descriptor of the same file would wait on the first forever).
    _kernel_handles[run_dir] = handle


_kernel_handles: dict[Path, IO[str]] = {}


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (nothing written after evalnb is gone)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _wait_for_old_kernel(run_dir: Path) -> None:
    """A kernel of a killed run dies with its parent; give it a moment, never overlap it."""
    import fcntl

    path = run_dir / KERNEL_LOCK_NAME
    if not path.exists():
        return
    deadline = time.monotonic() + KERNEL_EXIT_WAIT
    with path.open("a+", encoding="utf-8") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return   # closing the handle frees it again
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RunLocked(f"{run_dir}: a stage kernel of an earlier run is still "
                                    f"running ({describe(_read_holder(handle))})") from None
                time.sleep(0.05)
