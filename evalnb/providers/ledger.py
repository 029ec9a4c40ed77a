"""Ledgers that several processes share: a JSON file changed only under an OS file lock.

A quota belongs to an endpoint and its key, not to a run. Every evalnb process
of the user on this machine that calls the same endpoint under a ``rate_limit`` enters its
calls in one :class:`QuotaLedger`, a file named by a hash of the endpoint's identity:

    provider, base URL, model name, and the NAME of the key variable (never the key's value)

under :func:`quota_dir` (``$EVALNB_QUOTA_DIR``, else ``$XDG_STATE_HOME/evalnb/quota``, else
``~/.local/state/evalnb/quota``). Each entry is one call sent: when (the system-wide monotonic
clock, shared by every process of one boot), and its requests, input and output tokens, the
estimate first and the reported usage once the reply is in. An entry leaves the ledger when
it leaves the window, so the reservations of a killed process age out with it; a ledger
written before the machine last booted is read as empty (its clock readings mean nothing now).

Two processes that must not share a quota on purpose (two keys under one variable name in
two shells, say) are given separate ledgers by pointing ``EVALNB_QUOTA_DIR`` at two directories.

:class:`LockedJson` is the mechanism itself, also used by the spending ceiling's ledger
(:mod:`evalnb.execution.budget`). ``fcntl.flock`` locks a separate ``.lock`` file so that the
data file can be replaced whole (write a temporary file, rename it): a process killed while
writing leaves the old ledger, never half a new one.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import json
import os
import tempfile
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

QUOTA_DIR_ENV = "EVALNB_QUOTA_DIR"
DIMENSIONS = ("requests", "input_tokens", "output_tokens")


class LockedJson:
    """A JSON object in ``path`` read and written whole under an exclusive ``flock``.

    One instance per path per process (:func:`locked_json`): a transaction never nests, and
    the threads of one process take turns on a thread lock before the file lock.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self._thread_lock = threading.Lock()

    @contextmanager
    def transaction(self) -> Iterator[dict[str, Any]]:
        """The current object, to read and change in place; written back when the block ends
        without an exception (not at all otherwise)."""
        with self._thread_lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o666)   # the umask decides
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                data = self._read()
                yield data
                self._write(data)
            finally:
                os.close(fd)   # closing the descriptor frees the lock

    def read(self) -> dict[str, Any]:
        """A snapshot, under the lock (never a half-replaced file)."""
        with self.transaction() as data:
            return json.loads(json.dumps(data))

    def _read(self) -> dict[str, Any]:
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
        except ValueError:   # not ours, or damaged by hand: start again rather than fail every call
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: Mapping[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(data, separators=(",", ":")))
            os.chmod(tmp, 0o666 & ~_umask())   # mkstemp makes 0600; the umask decides, as for any file
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


_instances: dict[Path, LockedJson] = {}
_instances_lock = threading.Lock()


def locked_json(path: Path) -> LockedJson:
    path = path.resolve()
    with _instances_lock:
        if path not in _instances:
            _instances[path] = LockedJson(path)
        return _instances[path]


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


# --- the shared quota window ----------------------------------------------------------------------

@dataclass
class WindowEntry:
    """One call entered in a window: from when it counts (by when it reached the server at the
    latest) and what it costs (estimated, then reported); ``started``: when it was entered
    (known only to the process that entered it)."""

    sent_at: float
    cost: dict[str, float]
    id: str = ""
    started: float = 0.0


def quota_dir() -> Path:
    """Where the quota ledgers live (see the module docstring)."""
    if os.environ.get(QUOTA_DIR_ENV):
        return Path(os.environ[QUOTA_DIR_ENV]).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state).expanduser() / "evalnb" / "quota"


def endpoint_identity(provider: str, base_url: str | None, name: str, api_key_env: str | None) -> dict[str, str]:
    """What names a quota: never the key's value; a base URL without any user:password in it."""
    url = base_url or ""
    if url:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)[-1]
        url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    return {"provider": provider, "base_url": url, "model": name, "api_key_env": api_key_env or ""}


def boot_id() -> str:
    """This boot of the machine (Linux), so that clock readings of an earlier boot are dropped."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


_ids = itertools.count(1)


class QuotaLedger:
    """The calls every process sent to one endpoint within its window (see the module docstring)."""

    def __init__(self, identity: Mapping[str, str], directory: Path | None = None) -> None:
        self.identity = dict(identity)
        digest = hashlib.sha256(json.dumps(self.identity, sort_keys=True).encode()).hexdigest()[:24]
        self.store = locked_json((directory or quota_dir()) / f"{digest}.json")
        self._boot = boot_id()

    @property
    def path(self) -> Path:
        return self.store.path

    @contextmanager
    def window(self, horizon: float) -> Iterator[deque[WindowEntry]]:
        """Every entry sent after ``horizon`` (older ones are dropped for good), in the order
        sent; entries appended or changed in the block are written back under the same lock."""
        with self.store.transaction() as data:
            rows = data.get("entries", []) if data.get("boot") == self._boot else []
            kept = sorted((r for r in rows if r[1] > horizon), key=lambda r: r[1])   # the oldest leave first
            entries = deque(WindowEntry(r[1], dict(zip(DIMENSIONS, r[2:5])), r[0]) for r in kept)
            yield entries
            data.update(boot=self._boot, endpoint=self.identity,
                        entries=[[e.id, e.sent_at, *(e.cost[d] for d in DIMENSIONS)] for e in entries])

    def correct(self, entry: WindowEntry) -> None:
        """The entry's time and cost once its reply is in (nothing if it has left the window)."""
        with self.store.transaction() as data:
            for row in data.get("entries", []):
                if row[0] == entry.id:
                    row[1:5] = [entry.sent_at, *(entry.cost[d] for d in DIMENSIONS)]
                    break

    @staticmethod
    def new_id() -> str:
        return f"{os.getpid()}-{next(_ids)}"

