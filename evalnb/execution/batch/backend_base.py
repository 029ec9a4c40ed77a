"""What every batch backend shares: the :class:`Backend` interface a provider's batch API is
driven through, a batch's :class:`Poll`, and how timestamps, unanswered requests and failed
calls to the batch API itself are read.

A request the batch did not answer (expired, cancelled, missing) is transient; a failed call
to a batch API (create, retrieve, list) is classified like the same failure of a live call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, Protocol

from evalnb.providers.base import Completion, ChatRequest, ProviderError, transport_error

PollState = Literal["running", "ended", "failed"]
Outcome = Completion | ProviderError
# How far the local clock and the provider's may disagree when looking a batch up by time.
CLOCK_SKEW = 600.0

@dataclass
class Poll:
    """A batch as the provider last described it."""

    state: PollState                  # running; ended (results to collect); failed as a whole
    provider_state: str               # the provider's own word for it
    counts: dict[str, int] = field(default_factory=dict)
    finished_at: str | None = None
    error: str | None = None
    raw: Any = None                   # the SDK's batch object, handed back to results()


class Backend(Protocol):
    provider: str

    def line(self, custom_id: str, request: ChatRequest) -> Any: ...

    def line_bytes(self, line: Any) -> bytes:
        """The request as it counts against the batch's byte limit (as a file line, where the
        provider takes a file)."""

    async def submit(self, tag: str, lines: Sequence[Any] | None, spool: Path | None) -> tuple[str, dict[str, Any]]:
        """Create the batch from ``lines`` (inline) or, when None, the file ``spool``."""

    async def find(self, tag: str, since: float, count: int, claimed: set[str]) -> str | None: ...

    async def poll(self, batch_id: str) -> Poll: ...

    async def results(self, poll: Poll, order: Sequence[str]) -> list[tuple[str, Outcome]]: ...


def iso(value: Any) -> str | None:
    """A provider's timestamp (epoch seconds or datetime) as ISO 8601 UTC."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value, timezone.utc)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc).isoformat(timespec="seconds")
    return str(value)


def epoch(value: Any) -> float:
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def lost(kind: str, detail: str = "") -> ProviderError:
    """A request the batch did not answer (expired, cancelled, missing): resumable."""
    return ProviderError("transient", f"batch request {kind}" + (f": {detail}" if detail else ""),
                         code=f"batch_{kind}")


def management_error(error: Exception) -> ProviderError:
    """A failed call to a batch API itself (create, retrieve, list), classified like a live one."""
    if isinstance(error, ProviderError):
        return error
    from evalnb.providers.openai_compat import sdk_error
    import anthropic
    import openai
    if isinstance(error, (openai.APIError, anthropic.APIError)):
        return sdk_error(error)
    from google.genai import errors
    if isinstance(error, errors.APIError):
        from evalnb.providers.gemini import api_error   # the live reading: endpoint causes, retry hints
        return api_error(error)
    return transport_error(error)   # a refused connection says so, and was not billed
