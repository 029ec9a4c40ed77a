"""Every fault the fake server can inject, against every provider, through the real SDKs and
the one retry policy.

A fault followed by a good answer must end in the good answer after exactly two attempts
(the server saw two requests), never in ``empty``. With no retries left the fault is a
``transient`` error; a malformed reply keeps the start of its raw body in the message.
Retry hints (Retry-After, retry-after-ms, Gemini's RetryInfo.retryDelay) set the wait, capped
by the policy; every context-length wording is a permanent error with the probe hint.
"""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from evalnb.core.run_config import EndpointConfig
from evalnb.providers import make_provider
from evalnb.providers.base import CONTEXT_LENGTH_HINT, ChatRequest
from evalnb.providers.retry import Outcome, RetryPolicy, call_with_retries
from tests.fakeserver import FAULT_KINDS, Error, FakeLLMServer, Reply, Text, WrongShape, fault_reply

SDKS = ("openai", "anthropic", "gemini")
POLICY = RetryPolicy(max_retries=5, base_delay=0.01, max_delay=0.02, retry_after_cap=0.3)
NO_RETRY = RetryPolicy(max_retries=0, base_delay=0.01, max_delay=0.02, retry_after_cap=0.3)
HINT = 0.05                  # a 429 hint below the cap: waited exactly
HANG_TIMEOUT = 0.5           # client timeout for the "hang" kind; the server waits far longer
MALFORMED = ("cutoff", "not_json", "html", "wrong_shape", "wrong_shape_null")
# Every injectable kind, plus the wrong shape whose answer field is present but null
# (e.g. Anthropic's ``content: null``).
CASES = (*FAULT_KINDS, "wrong_shape_null")
GOOD = "the good answer"


def endpoint(sdk: str, server: FakeLLMServer, timeout: float = 10.0) -> EndpointConfig:
    base = f"{server.url}/v1" if sdk == "openai" else server.url
    return EndpointConfig(provider=sdk, name=f"{sdk}-model", base_url=base, concurrency=1, timeout=timeout)


def outcome(ep: EndpointConfig, policy: RetryPolicy, prompt: str = "q") -> Outcome:
    async def go() -> Outcome:
        provider = make_provider(ep)
        assert provider is not None
        try:
            return await call_with_retries(provider, ChatRequest(prompt, 10), policy, random.Random(0))
        finally:
            await provider.aclose()
    return asyncio.run(go())


def fault(kind: str, sdk: str) -> Reply:
    if kind == "wrong_shape_null":
        return WrongShape(null=True)
    return fault_reply(kind, sdk, hint=HINT, hang=30.0)


def timeout_for(kind: str) -> float:
    return HANG_TIMEOUT if kind == "hang" else 10.0


def quotes(message: str, start: str) -> bool:
    """``message`` holds ``start`` as sent, or escaped as a Python or JSON string literal
    would show it (a newline as ``\\n``)."""
    return any(form in message for form in (start, repr(start)[1:-1], json.dumps(start)[1:-1]))


# --- each fault, then a good answer -------------------------------------------------------------

@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("kind", CASES)
def test_fault_then_good_answer_takes_exactly_two_attempts(server: FakeLLMServer, sdk: str, kind: str) -> None:
    server.queue(fault(kind, sdk), Text(GOOD))
    result = outcome(endpoint(sdk, server, timeout_for(kind)), POLICY)
    assert result.error is None, f"{kind} on {sdk} ended the call: {result.error.as_dict()}"
    assert result.completion is not None
    assert (result.completion.status, result.completion.text) == ("ok", GOOD)   # never `empty`
    assert result.attempts == 2 == server.count()
    if kind == "429_hint":
        assert result.waits == [pytest.approx(HINT)]
    else:   # the policy's own backoff, not a hint
        assert len(result.waits) == 1 and result.waits[0] <= POLICY.max_delay


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("kind", CASES)
def test_fault_with_no_retry_left_is_transient(server: FakeLLMServer, sdk: str, kind: str) -> None:
    server.queue(fault(kind, sdk))
    result = outcome(endpoint(sdk, server, timeout_for(kind)), NO_RETRY)
    assert result.completion is None, f"{kind} on {sdk} became a completion: {result.completion}"
    assert result.error is not None
    assert result.error.kind == "transient" and result.attempts == 1 == server.count()
    if kind not in MALFORMED:
        return
    if sdk == "gemini" and kind.startswith("wrong_shape"):
        # google-genai parses a well-formed JSON body before evalnb sees it and keeps no copy:
        # the record shows the reply as parsed (null fields left out), under the API's own names.
        sent = json.loads(server.requests[0].response)
        shown = [name for name, value in sent.items() if value is not None]
        assert shown and all(f'"{name}"' in result.error.message for name in shown), result.error.message
        return
    # the start of the raw body is kept for the reader.
    start = server.requests[0].response[:20].decode("utf-8")
    assert quotes(result.error.message, start), f"no {start!r} in {result.error.message!r}"


# --- retry hints --------------------------------------------------------------------

def hinted(form: str, seconds: float) -> Error:
    if form == "retry-after":
        return Error(429, "slow down", retry_after=seconds)
    if form == "retry-after-ms":
        return Error(429, "slow down", retry_after_ms=seconds * 1000)
    return Error(429, "Resource has been exhausted (e.g. check quota).", retry_delay=seconds)


HINT_CASES = [(sdk, form) for sdk in SDKS for form in ("retry-after", "retry-after-ms")] + [("gemini", "RetryInfo")]


@pytest.mark.parametrize("sdk, form", HINT_CASES)
@pytest.mark.parametrize("seconds, expected", [(HINT, HINT), (500.0, POLICY.retry_after_cap)])
def test_retry_hint_sets_the_wait_capped(server: FakeLLMServer, sdk: str, form: str, seconds: float,
                                         expected: float) -> None:
    server.queue(hinted(form, seconds), Text(GOOD))
    result = outcome(endpoint(sdk, server), POLICY)
    assert result.completion is not None and result.completion.text == GOOD
    assert result.attempts == 2 == server.count()
    assert result.waits == [pytest.approx(expected)]


def test_gemini_retry_info_wins_over_backoff_for_every_retry(server: FakeLLMServer) -> None:
    server.queue(hinted("RetryInfo", 0.07), hinted("RetryInfo", 0.09), Text(GOOD))
    result = outcome(endpoint("gemini", server), POLICY)
    assert result.completion is not None and result.attempts == 3
    assert result.waits == [pytest.approx(0.07), pytest.approx(0.09)]


# --- context-length wordings ---------------------------------------------------------------------

CONTEXT_CASES: list[tuple[str, str, str]] = [
    ("openai", "too_long", "maximum context length is 5"),
    ("anthropic", "too_long", "prompt is too long: 15 tokens > 5 maximum"),
    ("anthropic", "exceed_limit", "input length and `max_tokens` exceed context limit: 15 + 10 > 5"),
    ("gemini", "too_long", "exceeds the maximum number of tokens allowed (5)"),
]


@pytest.mark.parametrize("sdk, style, wording", CONTEXT_CASES)
def test_context_length_wording_is_permanent_with_the_probe_hint(server: FakeLLMServer, sdk: str, style: str,
                                                                 wording: str) -> None:
    server.max_prompt_chars = 5
    server.context_style = style
    result = outcome(endpoint(sdk, server), POLICY, prompt="a longer prompt")
    assert result.error is not None and result.completion is None
    assert result.error.kind == "permanent" and result.error.status_code == 400
    assert result.attempts == 1 == server.count()
    assert wording in result.error.message
    assert result.error.message.endswith(f"[{CONTEXT_LENGTH_HINT}]"), result.error.message

