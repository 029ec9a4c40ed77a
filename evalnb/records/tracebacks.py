"""The innermost cause of a failure, read from the text of a traceback (what an executed
notebook keeps of a failed cell).

An exception group (a ``TaskGroup`` of calls) says only ``unhandled errors in a TaskGroup (1
sub-exception)``; what went wrong is nested inside it, in Python's layout::

      + Exception Group Traceback (most recent call last):
      | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)
      +-+---------------- 1 ----------------
        | Traceback (most recent call last):
        |     raise KeyError('status')
        | KeyError: 'status'
        +------------------------------------

The innermost cause is the exception line nested deepest (the first such sub-exception; its own
line, not a cause it was raised from). IPython sends an exception group as that text on
stderr, with no error output at all, so the text is all there is to read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
GROUP_HEADER = "Exception Group Traceback"
# Inside a group's box: indentation, a bar, one space, then `Name: message` (a File line or a
# code line has more spaces after the bar; `Traceback (most ...` has a space in its first word).
_BOXED = re.compile(r"^(?P<indent>[ ]*)\| (?P<name>[A-Za-z_][\w.]*)(?:: (?P<message>.*))?$")
_SEPARATOR = re.compile(r"^[ ]*\+-")


def innermost_cause(text: str | Iterable[str]) -> str | None:
    """``KeyError: 'status'`` for a traceback holding an exception group; None when the text
    holds no exception group (its own last line says what happened)."""
    lines = ANSI.sub("", text if isinstance(text, str) else "\n".join(text)).splitlines()
    if not any(GROUP_HEADER in line for line in lines):
        return None
    found: list[tuple[int, int, str]] = []   # (depth, block, "Name: message")
    block = 0
    for line in lines:
        if _SEPARATOR.match(line):
            block += 1
            continue
        if (match := _BOXED.match(line)) is not None:
            message = match["message"]
            found.append((len(match["indent"]), block,
                          match["name"] + (f": {message}" if message is not None else "")))
    if not found:
        return None
    deepest = max(depth for depth, _, _ in found)
    leaves = [(blk, text) for depth, blk, text in found if depth == deepest]
    first_block = leaves[0][0]
    cause = [text for blk, text in leaves if blk == first_block][-1]
    others = len({blk for blk, _ in leaves}) - 1
    return cause + (f" (and {others} more in the exception group)" if others else "")
