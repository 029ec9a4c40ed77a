"""What a command says on the terminal, by one set of rules: messages on stderr (stdout holds
what a script reads: a results table, or with ``--json`` one JSON document), as loud as
``-q`` / ``-v`` ask, and on Ctrl-C one line saying what was kept and how to resume.

The command's process is evalnb's own (:func:`evalnb.app.main.command`), so the settings live
here for the length of one command: :func:`configure` sets them from the arguments.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

EXIT_INTERRUPTED = 130   # 128 + SIGINT, as a shell reports a command Ctrl-C stopped

QUIET, NORMAL, VERBOSE = 0, 1, 2


@dataclass
class Settings:
    verbosity: int = NORMAL
    json: bool = False
    # What an interrupt leaves behind, said in one line: set by the command while it runs
    # (a run: its directory and how to resume), called once on Ctrl-C.
    on_interrupt: list[Callable[[], str]] = field(default_factory=list)


SETTINGS = Settings()


def configure(verbosity: int = NORMAL, as_json: bool = False) -> None:
    SETTINGS.verbosity, SETTINGS.json = verbosity, as_json
    SETTINGS.on_interrupt.clear()


def say(line: str, *, level: int = NORMAL) -> None:
    """A message for the person at the terminal (stderr), unless ``-q`` hides its level."""
    if SETTINGS.verbosity >= level:
        print(line, file=sys.stderr, flush=True)


def warnings(lines: Any, prefix: str = "") -> None:
    """A benchmark's warnings (an unlisted model's default caps ...) on the terminal of every
    command that reads the parameters, ``-q`` included: a run must not start on a guess
    the user never saw."""
    for line in lines:
        say(f"WARNING: {prefix}{line}", level=QUIET)


def results(text: str, document: Any) -> None:
    """A command's results: ``text`` on stdout, or ``document`` as one JSON document with
    ``--json``. ``-q`` keeps the JSON (a script asked for it) and drops the text."""
    if SETTINGS.json:
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
    elif SETTINGS.verbosity >= NORMAL and text:
        sys.stdout.write(text.rstrip("\n") + "\n")
    sys.stdout.flush()


def interrupted_line() -> str:
    """The one line Ctrl-C ends a command with: what the running command says was kept."""
    for describe in reversed(SETTINGS.on_interrupt):
        try:
            return describe()
        except Exception:   # noqa: BLE001 - a bad description must not hide the interrupt
            continue
    return "interrupted; nothing was changed that a new command cannot redo"
