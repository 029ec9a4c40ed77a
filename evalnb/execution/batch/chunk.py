"""A batch being filled before it is submitted: its calls' rows, and its requests spooled to a
file (the input of a provider that uploads one) and/or held in memory (inline requests) while
they stay within the provider's inline limit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalnb.execution.runner import Call


@dataclass
class Chunk:
    """A batch being filled: its calls, and its requests spooled to a file (a file input)
    and/or held in memory (inline requests) while they stay within the inline limit."""

    tag: str
    spool: Path | None                # the file copy (backends that upload a file), or None
    inline_limit: int | None          # bytes held inline at most; None: no limit; 0: never inline
    lines: list[Any] | None = None    # the inline requests, None once past the inline limit
    rows: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0
    reserved_usd: float = 0.0         # its calls' upper bounds at the batch price (the spending ceiling)

    def __post_init__(self) -> None:
        self.lines = [] if self.inline_limit != 0 else None

    def custom_id(self) -> str:
        return f"{self.tag}-{len(self.rows)}"

    def add(self, call: Call, fields: Mapping[str, Any], custom_id: str, line: Any, data: bytes) -> None:
        if self.spool is not None:
            with self.spool.open("ab") as f:   # documents are not all held at once
                f.write(data)
        self.size += len(data)
        if self.lines is not None:
            if self.inline_limit is not None and self.size > self.inline_limit:
                self.lines = None   # too large to send inline: the spooled file goes instead
            else:
                self.lines.append(line)
        self.rows.append({"custom_id": custom_id, "key": call.key, "fields": dict(fields)})
