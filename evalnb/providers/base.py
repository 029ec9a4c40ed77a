"""The one interface every provider implements: a request in, a completion out.

Providers never retry: each SDK is built with its own retries off, and a failure is
raised as a classified :class:`ProviderError` so that the runner's single retry policy
counts and records every attempt the same way for every provider.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Callable
from typing import Any, Protocol

from evalnb.core.errors import ConfigError
from evalnb.core.redaction import redact
from evalnb.providers.failures import dropped, endpoint_cause, unreached
# The request and completion types live in evalnb.core.types (shared by every layer); re-exported here.
from evalnb.core.types import ChatRequest as ChatRequest, Completion as Completion, Usage as Usage
from evalnb.core.types import CompletionStatus as CompletionStatus, ErrorKind as ErrorKind

# What is worth retrying: a timeout, a conflict, a rate limit, an overload (docs/operations.md, *Retries*).
TRANSIENT_STATUS = frozenset({408, 409, 429, 529})
# An error object's type -> the HTTP status it comes with (a stream's error event, a batch
# result's error carry only the type): Anthropic's types and the OpenAI-compatible ones.
ERROR_TYPE_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                     "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                     "rate_limit_error": 429, "rate_limit_exceeded": 429, "insufficient_quota": 429,
                     "api_error": 500, "server_error": 500, "timeout_error": 504, "overloaded_error": 529}
CONTEXT_LENGTH_HINT = ("the document did not fit the model's context window: probe the real "
                       "window with `evalnb probe-window` and set model.caps in the parameters")


class ProviderError(Exception):
    """A failed call, classified. The message never contains a key."""

    def __init__(self, kind: ErrorKind, message: str, *, status_code: int | None = None,
                 retry_after: float | None = None, code: str | None = None,
                 cause: str | None = None, reached: bool = True) -> None:
        message = redact(message)
        super().__init__(message)
        self.kind, self.message = kind, message
        self.status_code, self.retry_after, self.code = status_code, retry_after, code
        self.cause = cause        # kind "endpoint": why (evalnb.providers.failures)
        self.reached = reached    # False: the request never reached the provider (not billed)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "status_code": self.status_code, "code": self.code,
                "message": self.message, **({"cause": self.cause} if self.cause else {}),
                **({} if self.reached else {"reached": False})}


def classify_status(status: int, code: str | None = None) -> ErrorKind:
    """Transient: 408, 409, 429, 5xx, 529. Permanent: any other 4xx (an endpoint's refusal of
    its own is told apart before this, by :func:`http_error`)."""
    if status in TRANSIENT_STATUS or status >= 500:
        return "transient"
    return "permanent"


def status_of(text: str | None) -> CompletionStatus:
    """Whitespace-only output counts as empty: there is nothing to grade."""
    return "ok" if text and text.strip() else "empty"


# Every "the prompt did not fit" wording we know of, lower-cased:
# OpenAI      code context_length_exceeded; "This model's maximum context length is N tokens"
# Anthropic   "prompt is too long: N tokens > M maximum";
#             "input length and `max_tokens` exceed context limit: N + M > W"
# Gemini      "The input token count (N) exceeds the maximum number of tokens allowed (M)."
# vLLM etc.   "... longer than the model's context length", "context window"
CONTEXT_LENGTH_WORDINGS = ("context_length", "context length", "maximum context", "too long",
                           "exceeds the maximum number of tokens", "exceed context limit",
                           "context window", "context limit")


def is_context_length_error(message: str, code: str | None) -> bool:
    text = f"{code or ''} {message}".lower()
    return any(k in text for k in CONTEXT_LENGTH_WORDINGS)


RAW_BODY_KEPT = 300


def malformed_reply(body: object, problem: str) -> ProviderError:
    """A 200 that is not a well-formed answer of its API: transient, retried,
    with the start of what came back kept (redacted) so the record shows the gateway's page."""
    text = body if isinstance(body, str) else repr(body)
    start = text[:RAW_BODY_KEPT] + ("…" if len(text) > RAW_BODY_KEPT else "")
    return ProviderError("transient", f"malformed reply: {problem}; body starts {start!r}",
                         code="malformed_reply")


def reply_shape(reply: object) -> str:
    """What a parsed reply held, for the record of a malformed one."""
    dump = getattr(reply, "model_dump_json", None)
    if callable(dump):
        try:
            # by_alias: the API's own field names (Gemini's camelCase), as the body had them.
            return str(dump(exclude_none=True, by_alias=True, exclude={"sdk_http_response"}))
        except Exception:   # an SDK object that cannot dump itself: its repr will do
            pass
    return reply if isinstance(reply, str) else repr(reply)


def unreadable_reply(error: Exception) -> ProviderError:
    """The SDK could not read the reply at all: a JSON document cut off or not JSON."""
    document = getattr(error, "doc", None)   # json.JSONDecodeError keeps the text it was given
    return malformed_reply(document if document is not None else "", f"{type(error).__name__}: {error}")


def http_error(status: int, message: str, *, code: str | None = None,
               retry_after: float | None = None, error_type: str | None = None,
               details: Any = None) -> ProviderError:
    """The one place an HTTP failure becomes a classified ProviderError: an endpoint's
    refusal of its own (:func:`evalnb.providers.failures.endpoint_cause`, which
    also reads the reply's ``error_type`` and Gemini's error ``details``), else transient or
    the item's permanent failure."""
    cause = endpoint_cause(status, message, codes=(code, error_type), details=details)
    if cause is not None:
        return ProviderError("endpoint", f"HTTP {status}: {message}", status_code=status,
                             code=code or error_type, cause=cause)
    kind = classify_status(status, code)
    if kind == "permanent" and is_context_length_error(message, code):
        message = f"{message} [{CONTEXT_LENGTH_HINT}]"
    return ProviderError(kind, f"HTTP {status}: {message}", status_code=status,
                         retry_after=retry_after, code=code)


def transport_error(error: BaseException) -> ProviderError:
    """A failure with no HTTP status (the connection, a timeout): transient. One that never
    reached the provider says so and is not billed (:func:`evalnb.providers.failures.unreached`)."""
    never = unreached(error)
    if never is not None:
        return ProviderError("transient", never[1], code=never[0], reached=False)
    lost = dropped(error)
    if lost is not None:
        return ProviderError("transient", lost[1], code=lost[0])
    return ProviderError("transient", f"{type(error).__name__}: {error}")


def retry_after_seconds(headers: Any, body: Any = None) -> float | None:
    """The server's retry hint: ``retry-after-ms`` or ``retry-after`` (seconds)
    from response headers, or Google's ``RetryInfo.retryDelay`` (``"1.5s"``) in an error body."""
    delay = _retry_info_delay(body)
    if delay is not None:
        return delay
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


def _retry_info_delay(body: Any) -> float | None:
    """``error.details[*].retryDelay`` of a ``google.rpc.RetryInfo`` entry, in seconds."""
    error = body.get("error", body) if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            delay = str(detail.get("retryDelay", ""))
            try:
                return max(0.0, float(delay.removesuffix("s")))
            except ValueError:
                return None
    return None


RATE_HEADER_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")


def rate_limit_headers(headers: Any) -> dict[str, str]:
    """The quota headers of a reply (OpenAI ``x-ratelimit-*``, Anthropic ``anthropic-ratelimit-*``)."""
    return {k.lower(): v for k, v in headers.items() if k.lower().startswith(RATE_HEADER_PREFIXES)}


def api_key(env_var: str | None, role: str) -> str:
    """The key, read only from the environment variable the parameters name."""
    if not env_var:
        return "no-key"  # local servers (vLLM, llama.cpp) accept any bearer token
    value = os.environ.get(env_var)
    if not value:
        raise ConfigError(f"{role}.api_key_env: environment variable {env_var} is not set")
    return value


def sdk_client_options(transport: Callable[..., Any], *, base_url: str | None, api_key_env: str | None,
                       role: str, timeout: float) -> dict[str, Any]:
    """The arguments every SDK client (``openai.AsyncOpenAI``, ``anthropic.AsyncAnthropic``) is
    built with: the key from the environment, the SDK's own retries off (the runner's policy
    owns every attempt), and ``transport`` (the SDK's ``DefaultAioHttpClient``) over the
    process's one TLS context. The aiohttp transport costs about a fifth less CPU per call than
    the default one (bench/)."""
    return {"base_url": base_url, "api_key": api_key(api_key_env, role), "max_retries": 0, "timeout": timeout,
            "http_client": transport(timeout=timeout, verify=shared_tls_context())}


class Provider(Protocol):
    """What the runner needs from a provider."""

    model: str          # the model name as sent
    concurrency: int    # how many calls may be in flight at once

    async def complete(self, request: ChatRequest) -> Completion: ...

    async def aclose(self) -> None: ...


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """The TLS context every SDK client of this process uses: the one the SDKs would build
    themselves (httpx2's default, which honours SSL_CERT_FILE and SSL_CERT_DIR), built once.
    Each client would otherwise load the CA bundle again, about 50 ms apiece: a judge panel
    of three paid for it at the start of every stage."""
    import httpx2

    return httpx2.create_ssl_context()
