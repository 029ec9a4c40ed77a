"""Live progress in the command's terminal, for every command that makes calls.

The stage kernel appends its stages' snapshots to a file (:mod:`evalnb.views.progress_channel`);
a thread of the command reads it and draws, per stage: calls done / total, ok and failed so
far, the rate, elapsed and estimated time left, and what it is waiting on (a quota window, a
retry's backoff, batches in flight). A stage none of whose calls reaches a model (offline)
shows no rate and no time left (:mod:`evalnb.views.progress`).

- On a terminal: one tqdm bar per stage, updated in place (tqdm does the drawing).
- Otherwise (a log file, a pipe, a CI job): a timestamped line when a stage starts and ends,
  each time it passes a tenth of its calls, and otherwise at most every 30 s, only when
  something changed (``-v``: every 5 s, and whenever what it waits on changes); so the log of
  a six-hour run holds a few hundred lines, each readable alone.

``evalnb suite`` gives each contestant's run a file of its own and draws them all, labelled.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from evalnb.app import output
from evalnb.views.progress_channel import PROGRESS_ENV, Reader, Snapshot

POLL_SECONDS = 0.2
LINE_SECONDS = 30.0          # off a terminal: the longest silence while a stage runs ...
VERBOSE_LINE_SECONDS = 5.0   # ... and with -v
STEPS = 10                   # ... and a line at each tenth of a stage's calls
FALLBACK_COLUMNS = 100


@dataclass
class _Stage:
    label: str
    last: Snapshot
    bar: Any = None                 # a tqdm bar, on a terminal
    line_at: float = 0.0            # off a terminal: when the last line was written
    step: int = 0                   # ... and the last tenth it reported
    shown: tuple[Any, ...] = ()     # ... and what that line said (counts, waiting)


@dataclass
class LiveView:
    """Draws the snapshots of one or more progress files on ``stream``."""

    stream: IO[str] = field(default_factory=lambda: sys.stderr)
    terminal: bool | None = None
    verbose: bool = False
    readers: dict[str, Reader] = field(default_factory=dict)
    stages: dict[tuple[str, str], _Stage] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        if self.terminal is None:
            self.terminal = self.stream.isatty()

    def watch(self, path: Path, label: str = "") -> None:
        with self.lock:
            self.readers[label] = Reader(path)

    def start(self) -> LiveView:
        self._thread = threading.Thread(target=self._loop, name="evalnb-progress", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.drain()
        with self.lock:
            for stage in self.stages.values():
                self._close(stage)

    def message(self, line: str) -> None:
        """A line of the command's own (a stage starting, a run's end), drawn clear of the bars:
        what the kernel has written so far is drawn first, finished bars closed."""
        self.drain()
        with self.lock:
            if self.terminal and any(s.bar is not None for s in self.stages.values()):
                from tqdm import tqdm
                tqdm.write(line, file=self.stream)
            else:
                print(line, file=self.stream, flush=True)

    def drain(self) -> None:
        with self.lock:
            for label, reader in list(self.readers.items()):
                for snapshot in reader.read():
                    self._show(label, snapshot)
            if not self.terminal:
                for stage in self.stages.values():
                    self._maybe_line(stage, time.monotonic())

    def _loop(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                self.drain()
            except Exception:   # noqa: BLE001 - drawing progress must never stop a run
                continue

    # -- drawing ----------------------------------------------------------------------------

    def _show(self, label: str, snapshot: Snapshot) -> None:
        key = (label, snapshot.stage)
        stage = self.stages.get(key)
        if stage is None or snapshot.started > stage.last.started + 1e-6:   # a new stage (or a new pass of it)
            for other in [s for (lbl, _), s in self.stages.items() if lbl == label]:
                self._close(other)
            stage = self.stages[key] = _Stage(label, snapshot)
            if self.terminal:
                stage.bar = self._bar(stage)
            else:
                self._line(stage, time.monotonic())
        previous, stage.last = stage.last, snapshot
        if self.terminal:
            self._update_bar(stage, previous)
            if snapshot.final:
                self._close(stage)
        elif snapshot.final:
            self._line(stage, time.monotonic())
        elif self.verbose and snapshot.waiting != previous.waiting:
            self._line(stage, time.monotonic())

    def _bar(self, stage: _Stage) -> Any:
        from tqdm import tqdm

        from evalnb.views.progress import OFFLINE_BAR

        s = stage.last
        # A terminal that reports no size (a fresh pseudo-terminal) gets 100 columns, not none.
        width = {"dynamic_ncols": True} if _columns(self.stream) else {"ncols": FALLBACK_COLUMNS, "nrows": 24}
        look = {"bar_format": OFFLINE_BAR} if s.offline else {}
        return tqdm(total=s.total, initial=s.before, desc=_name(stage), unit="call", file=self.stream,
                    mininterval=0.5, leave=True, **width, **look)

    def _update_bar(self, stage: _Stage, previous: Snapshot) -> None:
        bar, s = stage.bar, stage.last
        if bar is None:
            return
        if s.total != bar.total:
            bar.total = s.total
        bar.set_postfix_str(_counts(s) + (f"; waiting: {s.waiting}" if s.waiting else ""), refresh=False)
        if s.done > bar.n:
            bar.update(s.done - bar.n)
        else:
            bar.refresh()

    def _close(self, stage: _Stage) -> None:
        if stage.bar is not None:
            stage.bar.close()
            stage.bar = None
        elif not self.terminal and not stage.last.final and stage.shown != _said(stage.last):
            self._line(stage, time.monotonic())

    def _maybe_line(self, stage: _Stage, now: float) -> None:
        s = stage.last
        if s.final:
            return
        step = s.done * STEPS // s.total if s.total else 0
        every = VERBOSE_LINE_SECONDS if self.verbose else LINE_SECONDS
        if step > stage.step or (now - stage.line_at >= every and _said(s) != stage.shown):
            self._line(stage, now)

    def _line(self, stage: _Stage, now: float) -> None:
        s = stage.last
        stage.line_at, stage.shown = now, _said(s)
        stage.step = s.done * STEPS // s.total if s.total else 0
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(s.at))
        print(f"{stamp} evalnb: {_name(stage)}: {progress_text(s)}", file=self.stream, flush=True)


def _columns(stream: IO[str]) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 0


def _name(stage: _Stage) -> str:
    return f"{stage.label}: {stage.last.stage}" if stage.label else stage.last.stage


def _said(s: Snapshot) -> tuple[Any, ...]:
    return (s.done, s.failed, s.waiting, s.final)


def _counts(s: Snapshot) -> str:
    others = sorted((n, st) for st, n in s.statuses.items() if st != "ok" and not st.startswith("failed"))
    text = f"ok {s.ok}, failed {s.failed}" + "".join(f", {st} {n}" for n, st in reversed(others))
    extra = [f"{s.retries} retr{'ies' if s.retries != 1 else 'y'}"] if s.retries else []
    extra += [f"{s.quota_waits} quota wait{'s' if s.quota_waits != 1 else ''}"] if s.quota_waits else []
    return text + (f" ({', '.join(extra)})" if extra else "")


def progress_text(s: Snapshot) -> str:
    """One stage's progress as a line: ``judge: 120/1,443 calls (8%), ok 118, failed 2 (3 retries),
    0.84 calls/s, elapsed 02:23, left ~26:15; waiting: quota window: judge1``."""
    from tqdm import tqdm

    elapsed = max(0.0, s.at - s.started)
    pct = f" ({100 * s.done // s.total}%)" if s.total else ""
    rate = s.new / elapsed if elapsed > 0 else 0.0
    left = (s.total - s.done) / rate if rate > 0 else None
    timing = f"elapsed {tqdm.format_interval(elapsed)}"
    if s.final:
        state = "done" if s.done >= s.total else "stopped"
        return f"{state}: {s.done:,}/{s.total:,} calls{pct}, {_counts(s)}; {s.new:,} new in {tqdm.format_interval(elapsed)}"
    if rate and not s.offline:   # an offline stage's rate says nothing (evalnb.views.progress)
        timing = f"{rate:.2f} calls/s, {timing}" + (f", left ~{tqdm.format_interval(left)}" if left is not None else "")
    return f"{s.done:,}/{s.total:,} calls{pct}, {_counts(s)}, {timing}" + (f"; waiting: {s.waiting}" if s.waiting else "")


@contextmanager
def live_progress(label: str = "") -> Iterator[LiveView | None]:
    """The progress channel of one command that makes calls: the file its kernel writes to,
    named in the environment the kernel is started with, and the view drawing it (None with
    ``-q``). A command that ``evalnb suite`` started already has a file named: its kernel
    writes there (the suite draws it too) and this command draws the same file in its log."""
    given = os.environ.get(PROGRESS_ENV)
    folder = None if given else Path(tempfile.mkdtemp(prefix="evalnb-progress-"))
    path = Path(given) if given else folder / "progress.jsonl"   # type: ignore[operator]
    os.environ[PROGRESS_ENV] = str(path)
    view = None
    if output.SETTINGS.verbosity > output.QUIET:
        view = LiveView(verbose=output.SETTINGS.verbosity >= output.VERBOSE)
        view.watch(path, label)
        view.start()
    try:
        yield view
    finally:
        if view is not None:
            view.stop()
        if not given:
            os.environ.pop(PROGRESS_ENV, None)
            shutil.rmtree(folder, ignore_errors=True)   # type: ignore[arg-type]
