"""How a stage's progress reaches the terminal of the command that runs it.

The calls are made in the stage kernel (:mod:`evalnb.app.runs.kernels`), whose output goes to the
executed notebook, not to the command's terminal. So the command names a file in the
environment it starts the kernel with (:data:`PROGRESS_ENV`, in a directory only its user
can enter), and the kernel's stages append to it one JSON line per change of their state, at
most a few a second: a :class:`Snapshot`, whole (the latest line of a stage says everything,
so a reader that misses lines misses nothing). The command reads the file as it grows
(:class:`Reader`) and draws it (:mod:`evalnb.app.live`); ``evalnb suite`` names one file per
contestant and draws them all. Without the variable (a notebook in JupyterLab, a script)
nothing is written: the notebook's own bar shows the progress there.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

PROGRESS_ENV = "EVALNB_PROGRESS_FILE"
MIN_INTERVAL = 0.25   # seconds between two lines of one stage (its last line is always written)


@dataclass
class Snapshot:
    """A stage's calls as they stand. ``before``: done by an earlier command (resumed);
    ``statuses``: this command's new records by status; ``waiting``: what holds calls back now
    (a quota window, a retry's backoff, batches in flight), empty when nothing does;
    ``offline``: none of the stage's calls reaches a model (drawn without a rate)."""

    stage: str
    total: int
    before: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    retries: int = 0          # retries this command has begun (each after a failed attempt)
    quota_waits: int = 0      # times a call began waiting for a quota window
    waiting: str = ""
    started: float = field(default_factory=time.time)
    at: float = field(default_factory=time.time)
    final: bool = False
    offline: bool = False

    @property
    def new(self) -> int:
        return sum(self.statuses.values())

    @property
    def done(self) -> int:
        return self.before + self.new

    @property
    def failed(self) -> int:
        return sum(n for s, n in self.statuses.items() if s.startswith("failed"))

    @property
    def ok(self) -> int:
        return self.statuses.get("ok", 0)


class Writer:
    """Appends a stage's snapshots to the file :data:`PROGRESS_ENV` names (if any)."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path if path is not None else os.environ.get(PROGRESS_ENV)
        self._file: IO[str] | None = None
        self._last = 0.0

    def write(self, snapshot: Snapshot, force: bool = False) -> None:
        if not self.path:
            return
        now = time.monotonic()
        if not force and now - self._last < MIN_INTERVAL:
            return
        self._last = now
        snapshot.at = time.time()
        try:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")   # noqa: SIM115 - kept open for the stage
            self._file.write(json.dumps(asdict(snapshot)) + "\n")
            self._file.flush()
        except OSError:   # the command is gone or its directory removed: progress is not the record
            self.path = None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Reader:
    """The snapshots appended to a file since the last read (whole lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> Iterator[Snapshot]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except OSError:
            return
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            try:
                yield snapshot_from(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue


def snapshot_from(data: dict[str, Any]) -> Snapshot:
    known = {k: v for k, v in data.items() if k in Snapshot.__dataclass_fields__}
    return Snapshot(**known)
