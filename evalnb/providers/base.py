"""The one interface every provider implements: a request in, a completion out.

Providers never retry: each SDK is built with its own retries off, and a failure is
raised as a classified :class:`ProviderError` so that the runner's single retry policy
counts and records every attempt the same way for every provider.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from evalnb.errors import ConfigError
from evalnb.redaction import redact

CompletionStatus = Literal["ok", "refused", "empty"]
ErrorKind = Literal["transient", "permanent"]

# Spec README reading 6 and the provider notes: what is worth retrying.
TRANSIENT_STATUS = frozenset({408, 409, 429, 529})
PERMANENT_QUOTA_CODES = frozenset({"insufficient_quota"})
CONTEXT_LENGTH_HINT = ("the document did not fit the model's context window: probe the real "
                       "window with `evalnb probe-window` and set model.caps in the parameters")


@dataclass(frozen=True)
class ChatRequest:
    """One user turn. ``temperature=None`` means the field is not sent at all."""

    prompt: str
    max_tokens: int
    temperature: float | None = None
    system: str | None = None
    json_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class Completion:
    text: str
    status: CompletionStatus
    finish_reason: str | None = None
    usage: Usage | None = None
    model_route: str | None = None       # the model the endpoint says answered
    request_id: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)   # other provider metadata


class ProviderError(Exception):
    """A failed call, classified. The message never contains a key."""

    def __init__(self, kind: ErrorKind, message: str, *, status_code: int | None = None,
                 retry_after: float | None = None, code: str | None = None) -> None:
        message = redact(message)
        super().__init__(message)
        self.kind, self.message = kind, message
        self.status_code, self.retry_after, self.code = status_code, retry_after, code

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "status_code": self.status_code, "code": self.code,
                "message": self.message}


def classify_status(status: int, code: str | None = None) -> ErrorKind:
    """Transient: 408, 409, 429, 5xx, 529. Permanent: any other 4xx, and quota exhaustion."""
    if status == 429 and code in PERMANENT_QUOTA_CODES:
        return "permanent"
    if status in TRANSIENT_STATUS or status >= 500:
        return "transient"
    return "permanent"


def status_of(text: str | None) -> CompletionStatus:
    """Whitespace-only output counts as empty: there is nothing to grade."""
    return "ok" if text and text.strip() else "empty"


def is_context_length_error(message: str, code: str | None) -> bool:
    text = f"{code or ''} {message}".lower()
    return any(k in text for k in ("context_length", "context length", "maximum context",
                                   "too long", "exceeds the maximum number of tokens"))


def http_error(status: int, message: str, *, code: str | None = None,
               retry_after: float | None = None) -> ProviderError:
    """The one place an HTTP failure becomes a classified ProviderError."""
    kind = classify_status(status, code)
    if kind == "permanent" and is_context_length_error(message, code):
        message = f"{message} [{CONTEXT_LENGTH_HINT}]"
    return ProviderError(kind, f"HTTP {status}: {message}", status_code=status,
                         retry_after=retry_after, code=code)


def retry_after_seconds(headers: Any) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds) from response headers, if numeric."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            continue  # an HTTP date: rare from these APIs; fall back to backoff
    return None


def api_key(env_var: str | None, role: str) -> str:
    """The key, read only from the environment variable the parameters name."""
    if not env_var:
        return "no-key"  # local servers (vLLM, llama.cpp) accept any bearer token
    value = os.environ.get(env_var)
    if not value:
        raise ConfigError(f"{role}.api_key_env: environment variable {env_var} is not set")
    return value


class Provider(Protocol):
    """What the runner needs from a provider."""

    model: str          # the model name as sent
    concurrency: int    # how many calls may be in flight at once

    async def complete(self, request: ChatRequest) -> Completion: ...

    async def aclose(self) -> None: ...
