"""Two questions a failed attempt is asked besides "is it worth another attempt".

**Did the endpoint refuse for reasons of its own?** (:func:`endpoint_cause`) An authentication
or permission error, a model or route the endpoint does not have, an exhausted account or a
billing error says nothing about the item that was sent: every other item would get the same
answer. Such a failure is of kind ``endpoint``: the stage stops calling that endpoint, the
item stays unanswered (never ``failed_permanent``, never scored) and the command exits 1.
How each provider says it, as their APIs send it:

=================  =============================================================================
authentication     401 (every API); OpenAI ``invalid_api_key``, ``account_deactivated``; Anthropic
                   ``authentication_error``; Gemini ``UNAUTHENTICATED``, and a wrong Gemini key,
                   which comes as **400** ``INVALID_ARGUMENT`` with ``ErrorInfo.reason``
                   ``API_KEY_INVALID`` ("API key not valid")
permission         403 (every API); Anthropic ``permission_error``; Gemini ``PERMISSION_DENIED``,
                   ``FAILED_PRECONDITION`` (the API not offered where the key is used, or not on its
                   tier), ``ErrorInfo`` ``SERVICE_DISABLED``, ``API_KEY_SERVICE_BLOCKED``,
                   ``CONSUMER_SUSPENDED``; OpenAI ``unsupported_country_region_territory``
model or route     404 (every API and any gateway in front); OpenAI ``model_not_found``; Anthropic
                   ``not_found_error``; Gemini ``NOT_FOUND``; and an OpenAI-compatible server's
                   400 that says the model does not exist
billing or quota   402 (Anthropic ``billing_error``); OpenAI **429** ``insufficient_quota``,
                   ``billing_hard_limit_reached``, ``billing_not_active``; Anthropic's 400 "credit
                   balance is too low"; Gemini ``ErrorInfo`` ``BILLING_DISABLED``; and Gemini's 429
                   ``RESOURCE_EXHAUSTED`` **only** when its ``QuotaFailure`` names a quota that
                   cannot refill within the run: a daily quota (a ``quotaId`` with ``PerDay``) or a
                   quota of 0 (no quota for that model on that tier)
=================  =============================================================================

Gemini sends ``RESOURCE_EXHAUSTED`` for a per-minute rate limit too, with the same "You exceeded
your current quota" wording, and a per-minute limit clears within a minute: without a
``QuotaFailure`` of a daily or zero quota a 429 stays a rate limit (transient, retried after its
``RetryInfo``). Words are read only where no code says it (Anthropic's credit balance, a
server's "model ... does not exist"); a 400 otherwise stays the item's own failure (a context
overflow, a content filter, a bad request).

**Did the request reach the provider at all?** (:func:`unreached`) A connection refused, a
name that did not resolve, a connection that failed while it was being made: nothing was sent,
so nothing can have been billed (the spending ceiling counts it at nothing), and the error says
so (``connection refused: 127.0.0.1:8000``) instead of the SDK's "Request timed out". A
connection reset once it was made is not among them: nothing tells whether the request had
been written by then, so it counts as possibly reached (billed at its upper bound).
"""

from __future__ import annotations

import re
import socket
from typing import Any

AUTHENTICATION, PERMISSION, NOT_FOUND, BILLING = ("authentication", "permission", "model or route not found",
                                                  "billing or quota")

ENDPOINT_STATUS = {401: AUTHENTICATION, 402: BILLING, 403: PERMISSION, 404: NOT_FOUND}

# Codes, error types (Anthropic's error.type) and statuses (Gemini's error.status, ErrorInfo reasons).
ENDPOINT_CODES = {
    "invalid_api_key": AUTHENTICATION, "account_deactivated": AUTHENTICATION,
    "authentication_error": AUTHENTICATION, "UNAUTHENTICATED": AUTHENTICATION, "API_KEY_INVALID": AUTHENTICATION,
    "permission_error": PERMISSION, "PERMISSION_DENIED": PERMISSION, "FAILED_PRECONDITION": PERMISSION,
    "SERVICE_DISABLED": PERMISSION, "API_KEY_SERVICE_BLOCKED": PERMISSION, "CONSUMER_SUSPENDED": PERMISSION,
    "unsupported_country_region_territory": PERMISSION,
    "model_not_found": NOT_FOUND, "not_found_error": NOT_FOUND, "NOT_FOUND": NOT_FOUND,
    "insufficient_quota": BILLING, "billing_hard_limit_reached": BILLING, "billing_not_active": BILLING,
    "billing_error": BILLING, "BILLING_DISABLED": BILLING,
}

ENDPOINT_WORDINGS = (
    (re.compile(r"credit balance is too low"), BILLING),                       # Anthropic
    (re.compile(r"api key not valid"), AUTHENTICATION),                        # Gemini
    (re.compile(r"\bmodels?\b[^.]{0,120}\b(?:not found|does not exist)"), NOT_FOUND),   # vLLM, gateways
)


def endpoint_cause(status: int, message: str, *, codes: tuple[str | None, ...] = (),
                   details: Any = None) -> str | None:
    """Why the endpoint refused for reasons of its own (one of the four causes above), or
    None when the failure is the item's or worth another attempt. ``codes``: the reply's code,
    error type or status, whichever it has; ``details``: Gemini's error body, read for its
    ``ErrorInfo`` reasons and ``QuotaFailure``."""
    if not 400 <= status < 500 or status in (408, 409):
        return None
    named = [*_error_info_reasons(details), *codes]   # the most specific first
    if status == 429:
        if any(c in ("insufficient_quota", "billing_hard_limit_reached", "billing_not_active") for c in named):
            return BILLING
        return BILLING if _quota_cannot_refill(details) else None
    if status in ENDPOINT_STATUS:
        return ENDPOINT_STATUS[status]
    for code in named:
        if code and code in ENDPOINT_CODES:
            return ENDPOINT_CODES[code]
    text = message.lower()
    return next((cause for pattern, cause in ENDPOINT_WORDINGS if pattern.search(text)), None)


def _details(body: Any) -> list[dict[str, Any]]:
    """``error.details`` of a Google error body (or of the error itself)."""
    error = body.get("error", body) if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    return [d for d in details if isinstance(d, dict)] if isinstance(details, list) else []


def _error_info_reasons(body: Any) -> list[str]:
    return [str(d["reason"]) for d in _details(body)
            if str(d.get("@type", "")).endswith("ErrorInfo") and d.get("reason")]


def _quota_cannot_refill(body: Any) -> bool:
    """A Gemini ``QuotaFailure`` of a daily quota, or of a quota of 0."""
    for detail in _details(body):
        if not str(detail.get("@type", "")).endswith("QuotaFailure"):
            continue
        for violation in detail.get("violations") or ():
            if not isinstance(violation, dict):
                continue
            if "perday" in str(violation.get("quotaId", "")).lower() or str(violation.get("quotaValue")) == "0":
                return True
    return False


def unreached(error: BaseException) -> tuple[str, str] | None:
    """``(code, message)`` when the request never reached the provider: refused, not resolved,
    or failed while connecting; None otherwise. Read through the exception's causes, where
    each SDK keeps the transport's own error (openai's APITimeoutError over aiohttp's
    ClientConnectorError over ConnectionRefusedError)."""
    seen = _chain(error)
    native = next((e for e in seen if type(e).__module__.split(".")[0] == "aiohttp"), None)
    if native is not None and not (_is_connector_error(native) or type(native).__name__ == "ConnectionTimeoutError"):
        # openai's and anthropic's aiohttp transport maps every aiohttp ClientConnectionError to
        # httpx's ConnectTimeout, a reset of an established connection included: aiohttp's own
        # error says whether the connection was ever made.
        return None
    where = next((f"{getattr(e, 'host', '?')}:{getattr(e, 'port', '?')}" for e in seen
                  if _is_connector_error(e) and hasattr(e, "host")), None) or _request_address(seen)
    if any(isinstance(e, socket.gaierror) or type(e).__name__ == "ClientConnectorDNSError" for e in seen):
        host = (where or "").rsplit(":", 1)[0] or "?"
        return "dns_failure", f"DNS failure: {host} did not resolve"
    if any(isinstance(e, ConnectionRefusedError) for e in seen):
        return "connection_refused", f"connection refused: {where or _address(seen)}"
    connector = next((e for e in seen if _is_connector_error(e) or type(e).__name__ in ("ConnectError", "ConnectTimeout")),
                     None)
    if connector is not None:
        return "connect_failed", f"could not connect: {where or '?'}: {connector}"
    return None


def dropped(error: BaseException) -> tuple[str, str] | None:
    """``(code, message)`` when a connection was made and then lost before a whole reply: reset
    by the peer, or closed before the response's headers. The request may have reached the
    provider, so it is billed at its upper bound like any other transient failure."""
    seen = _chain(error)
    lost = next((e for e in reversed(seen) if isinstance(e, (ConnectionResetError, BrokenPipeError))
                 or type(e).__name__ in ("ServerDisconnectedError", "ClientOSError", "RemoteProtocolError",
                                         "ReadError", "WriteError")), None)
    if lost is None:
        return None
    where = _request_address(seen)
    return "connection_dropped", f"connection dropped{f' by {where}' if where else ''}: {lost}"


def _chain(error: BaseException) -> list[BaseException]:
    """The error and its causes, outermost first (at most 12, never a cycle)."""
    seen: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and len(seen) < 12 and link not in seen:
        seen.append(link)
        link = link.__cause__ or link.__context__
    return seen


def _is_connector_error(error: BaseException) -> bool:
    """aiohttp's ClientConnectorError family (DNS, refused, TLS handshake), by name: the
    providers layer imports aiohttp only where an SDK uses it."""
    return any(c.__name__ == "ClientConnectorError" for c in type(error).__mro__)


def _request_address(chain: list[BaseException]) -> str | None:
    """``host:port`` of the request an httpx error (or the SDK error over it) carries; httpx's
    ``.request`` raises RuntimeError when the error was raised without one."""
    for error in chain:
        try:
            url = getattr(error, "request", None)
        except RuntimeError:
            continue
        url = getattr(url, "url", None)
        host = getattr(url, "host", None)
        if host:
            port = getattr(url, "port", None) or {"https": 443, "http": 80}.get(str(getattr(url, "scheme", "")), "?")
            return f"{host}:{port}"
    return None


def _address(chain: list[BaseException]) -> str:
    """``host:port`` from an OSError's text ("Connect call failed ('127.0.0.1', 8000)")."""
    for error in chain:
        found = re.search(r"\('([^']+)', (\d+)\)", str(error))
        if found:
            return f"{found.group(1)}:{found.group(2)}"
    return "?"
