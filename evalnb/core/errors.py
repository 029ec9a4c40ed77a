"""The errors a user can cause, each carrying one line that says where and what.

Bad input is reported once, clearly, before anything is written: the CLI turns these
into a single line on stderr and exit status 1.
"""

from __future__ import annotations


class EvalnbError(Exception):
    """Base class for errors that are the user's to fix (exit status 1)."""


class NotYet(EvalnbError):
    """A call cannot be prepared yet: it needs an answer that is not recorded (turn 2 of a
    conversation before turn 1 is answered). ``evalnb estimate`` and ``evalnb prompt`` say so
    rather than fail; a stage never sends such a call."""


class ConfigError(EvalnbError):
    """A parameters file or value is wrong (names the file or key)."""


class DataError(EvalnbError):
    """A data, corpus or predictions file is wrong (names the file, line or task, and field)."""

    def __init__(self, source: str, problem: str, *, line: int | None = None,
                 task: str | None = None, field: str | None = None) -> None:
        where = source
        if line is not None:
            where += f", line {line}"
        if task is not None:
            where += f", task {task!r}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}")
        self.source, self.line, self.task, self.field = source, line, task, field


class FingerprintMismatch(EvalnbError):
    """Resuming into a run whose scores would not be comparable with this one. ``changes``: one
    line per changed value, for a caller that says it in its own words (a suite)."""

    def __init__(self, message: str, changes: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.changes = changes


class EndpointFailure(EvalnbError):
    """An endpoint refused a stage's calls for reasons of its own: its calls were
    stopped, its items stay unanswered and nothing was scored. The message is the one line
    the command ends with (exit status 1)."""
