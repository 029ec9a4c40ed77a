"""One writer per run directory at a time.

Whoever makes a run's calls or writes its records holds an exclusive OS file lock
(``flock``) on ``.evalnb.lock`` in the run directory while it does: ``evalnb run`` for the
whole command; in a notebook or a script, each stage function (``generate``, ``judge``,
``aggregate``, batch collection with them) from its start until it returns or raises, and
``open_run`` only for the moment it records the run's fingerprint and configuration. Between
those, an idle kernel holds nothing, so the stage notebooks can be run one after another in
JupyterLab without shutting any kernel down. The OS frees the lock the moment its holder
dies, so a killed run never blocks a resume, and a second writer is refused at once with one
line (no traceback in a notebook) naming the holder as a person would recognise it: the
``evalnb run`` command line, or the Jupyter kernel, its notebook and the stage it runs.

A stage kernel that ``evalnb run`` starts cannot take the lock its parent holds. It is let
in on two conditions: the token the parent wrote into the lock file was handed to it in
the environment, and the holder is its own parent process. It then asks the OS to kill it
when that parent dies (``PR_SET_PDEATHSIG``: jupyter_client starts kernels in a session of
their own, so a kill of evalnb's process group misses them) and holds ``.evalnb.kernel.lock``
until it exits; a new holder of the run lock waits for that lock too, so a resume started
right after a kill never overlaps the old kernel.

Neither file outlives its use: a holder deletes the lock file while it still holds it, just
before it lets go, and whoever takes a lock checks that the file it locked is still the one
at the path (another holder may have deleted it between the open and the lock), else opens
it again. So a finished or killed run leaves no ``.evalnb.lock`` or ``.evalnb.kernel.lock``
naming a dead process (a killed holder's file is deleted by the next holder).

One job, who may write a run directory now, in one module: taking the lock, letting a stage
kernel in under its parent, and naming the holder change together, and a reader checking that
a killed run never blocks a resume needs all three side by side.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from evalnb.views import frontend
from evalnb.core.errors import EvalnbError
from evalnb.core.redaction import redact

LOCK_NAME = ".evalnb.lock"
KERNEL_LOCK_NAME = ".evalnb.kernel.lock"
TOKEN_ENV = "EVALNB_RUN_LOCK_TOKEN"
KERNEL_EXIT_WAIT = 10.0   # seconds a new holder waits for a dying kernel of an old run


class RunLocked(EvalnbError):
    """Another process is making calls or writing in this run directory."""

    def _render_traceback_(self) -> list[str]:
        """What IPython shows for it in a notebook: the one line, not a traceback (a refusal
        is not a bug to debug; where it was raised says nothing the line does not)."""
        return [f"RunLocked: {self}"]


@dataclass
class RunLock:
    dir: Path
    token: str
    file: IO[str] | None   # None for a stage kernel let in under its parent's lock

    def release(self) -> None:
        _held.pop(self.dir, None)
        if self.file is not None:
            try:   # the run's stopped kernel's lock first, while this one still keeps others out
                _wait_for_old_kernel(self.dir, remove=True)
            except RunLocked:   # still closing: the next holder waits for it and removes it
                pass
            # Deleted while held: a process that opened it meanwhile sees, once it has the lock,
            # that the path no longer names its file, and opens a new one.
            (self.dir / LOCK_NAME).unlink(missing_ok=True)
            self.file.close()   # closing the descriptor frees the flock
            self.file = None


_held: dict[Path, RunLock] = {}


@contextmanager
def holding(run_dir: Path, doing: str) -> Iterator[RunLock]:
    """The run directory held while the body makes calls or writes (``doing``: what, as the
    refusal names it, e.g. ``evalnb.judge``), released when it returns or raises. Within a
    process that already holds it (``evalnb run``, or an enclosing stage) this adds nothing
    and releases nothing."""
    run_dir = run_dir.resolve()
    if run_dir in _held:
        yield _held[run_dir]
        return
    lock = acquire(run_dir, doing)
    try:
        yield lock
    finally:
        lock.release()


def acquire(run_dir: Path, doing: str = "") -> RunLock:
    """Hold the run directory until released (idempotent within a process); RunLocked if
    another has it."""
    import fcntl

    run_dir = run_dir.resolve()
    if run_dir in _held:
        return _held[run_dir]
    run_dir.mkdir(parents=True, exist_ok=True)
    while True:
        handle = (run_dir / LOCK_NAME).open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle, settle=True)
            handle.close()
            if _is_parent_stage_kernel(holder):
                return _enter_as_stage_kernel(run_dir, holder)
            raise RunLocked(refusal(run_dir, holder)) from None
        if _still_at(handle, run_dir / LOCK_NAME):
            break
        handle.close()   # its holder deleted it as it let go: lock the new one
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
                             "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **holder_fields(doing)}) + "\n")
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


def holder_fields(doing: str) -> dict[str, Any]:
    """What the lock file says about its holder besides pid, host and time: enough for
    :func:`describe` to name it in words."""
    if frontend.in_kernel():
        return {"kernel": True, "notebook": frontend.notebook_path(), "doing": doing}
    return {"kernel": False, "command": redact(frontend.command_line())[:300], "doing": doing}


def describe(holder: dict[str, Any]) -> str:
    """The holder as a person recognises it: "`evalnb run params/x.yaml` (pid 14314, since
    10:42)", or "a Jupyter kernel running evalnb.judge since 10:42, notebook
    .../02_judge.ipynb (pid 14314)"."""
    if not holder:
        return "another process"
    pid = f"pid {holder.get('pid')}"
    if holder.get("host") and holder.get("host") != socket.gethostname():
        pid += f" on {holder['host']}"
    since = f" since {_clock(holder['since'])}" if holder.get("since") else ""
    doing = holder.get("doing") or ""
    if holder.get("kernel"):
        notebook = f", notebook {holder['notebook']}" if holder.get("notebook") else ""
        return f"a Jupyter kernel running {doing or 'evalnb'}{since}{notebook} ({pid})"
    if not holder.get("command"):
        return f"another process ({pid}{',' + since if since else ''})"
    if doing and not doing.startswith("evalnb run"):
        return f"`{holder['command']}` running {doing}{since} ({pid})"
    return f"`{holder['command']}` ({pid}{',' + since if since else ''})"


def refusal(run_dir: Path, holder: dict[str, Any]) -> str:
    """The one line a second writer gets: what holds the directory, and what to do."""
    if holder.get("kernel"):
        todo = "wait for it to finish there, or interrupt that kernel (Kernel > Interrupt Kernel), then try again"
    else:
        todo = "wait for it to finish, or stop it (Ctrl-C where it runs), then try again"
    return f"{run_dir} is in use by {describe(holder)}; {todo}"


def held_by(run_dir: Path) -> dict[str, Any] | None:
    """The holder of the run directory's lock when a process holds it now (its record, empty
    when unreadable), else None. Tried with a shared lock: nothing is written or taken."""
    import fcntl

    try:
        handle = open(run_dir / LOCK_NAME, encoding="utf-8")   # noqa: SIM115 - closed below
    except OSError:
        return None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(handle, settle=True)
    return None


def _clock(stamp: Any) -> str:
    """``10:42`` today, ``2026-03-14 10:42`` another day (the holder's local time)."""
    try:
        when = datetime.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return str(stamp)
    same_day = when.date() == datetime.now(when.tzinfo).date()
    return when.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M")


def _read_holder(handle: IO[str], settle: bool = False) -> dict[str, Any]:
    """The holder's record; with ``settle``, give a holder that took the lock a moment ago
    the time to write it (it writes right after taking the lock)."""
    for attempt in range(25 if settle else 1):
        if attempt:
            time.sleep(0.02)
        if handle.seekable():
            handle.seek(0)
        try:
            holder = json.loads(handle.read() or "{}")
        except json.JSONDecodeError:
            holder = {}
        if isinstance(holder, dict) and holder:
            return holder
    return {}


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

    while True:
        handle = (run_dir / KERNEL_LOCK_NAME).open("a+", encoding="utf-8")
        fcntl.flock(handle, fcntl.LOCK_EX)   # an earlier run's kernel may still be closing
        if _still_at(handle, run_dir / KERNEL_LOCK_NAME):
            break
        handle.close()
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


def _still_at(handle: IO[str], path: Path) -> bool:
    """The locked file is the one at ``path`` (not one its last holder deleted meanwhile)."""
    try:
        return os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False


def _wait_for_old_kernel(run_dir: Path, remove: bool = True) -> None:
    """A kernel of a killed run dies with its parent; give it a moment, never overlap it.
    Once it is gone, its lock file is deleted (``remove``), under the lock."""
    import fcntl

    path = run_dir / KERNEL_LOCK_NAME
    if not path.exists():
        return
    deadline = time.monotonic() + KERNEL_EXIT_WAIT
    with path.open("a+", encoding="utf-8") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if remove and _still_at(handle, path):
                    path.unlink(missing_ok=True)
                return   # closing the handle frees it again
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RunLocked(f"{run_dir}: a stage kernel of an earlier run is still "
                                    f"running ({describe(_read_holder(handle))})") from None
                time.sleep(0.05)
