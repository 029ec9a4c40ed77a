"""Every provider through its official SDK (or a real subprocess) against local servers.

The same scripted faults for each: refusal and empty mapping, Retry-After honoured and
capped, 5xx and timeouts retried at most five times, 4xx never retried, and the SDK's own
retries verifiably off (the server sees exactly the attempts the runner made).
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import sys
import textwrap
from pathlib import Path

import pytest

from evalnb.core.run_config import EndpointConfig
from evalnb.providers import make_provider
from evalnb.core.types import Turn
from evalnb.providers.base import ChatRequest, Usage
from evalnb.providers.retry import RetryPolicy, call_with_retries
from tests.conftest import FAST_RETRY
from tests.fakeserver import Empty, Error, FakeLLMServer, Hang, Raw, Refusal, Text

SDKS = ("openai", "anthropic", "gemini")
POLICY = RetryPolicy(**FAST_RETRY)


def endpoint(provider: str, server: FakeLLMServer, **extra) -> EndpointConfig:
    base = f"{server.url}/v1" if provider == "openai" else server.url
    return EndpointConfig(provider=provider, name=f"{provider}-model", base_url=base,
                          concurrency=1, **({"timeout": 5.0} | extra))


def outcome(ep: EndpointConfig, request: ChatRequest, policy: RetryPolicy = POLICY):
    async def go():
        provider = make_provider(ep)
        try:
            return await call_with_retries(provider, request, policy, random.Random(0))
        finally:
            await provider.aclose()
    return asyncio.run(go())


def tokens(text: str) -> int:   # the fake server's estimate, computed independently
    return max(1, math.ceil(len(text) / 4)) if text else 0


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("temperature, budget", [(0.1, 8192), (None, 32768), (0.1, 16384)])
def test_request_body(server: FakeLLMServer, sdk: str, temperature: float | None, budget: int) -> None:
    result = outcome(endpoint(sdk, server), ChatRequest("hello world", budget, temperature))
    assert result.completion.text == "ok"
    (request,) = server.requests
    # stream: auto streams a budget above 16,384: the same body plus the streaming flag
    assert request.streamed == (budget > 16384)
    body = {k: v for k, v in request.body.items() if k not in ("stream", "stream_options")}
    if sdk == "openai":
        assert body["messages"] == [{"role": "user", "content": "hello world"}]
        assert body["max_tokens"] == budget and body.get("temperature") == temperature
        assert ("temperature" in body) == (temperature is not None)
    elif sdk == "anthropic":
        expected = {"model": "anthropic-model", "max_tokens": budget,
                    "messages": [{"role": "user", "content": "hello world"}]}
        assert body == expected | ({"temperature": temperature} if temperature is not None else {})
    else:
        assert body["contents"] == [{"role": "user", "parts": [{"text": "hello world"}]}]
        assert "systemInstruction" not in body and "system_instruction" not in body
        config = body["generationConfig"]
        assert config.get("maxOutputTokens", config.get("max_output_tokens")) == budget
        assert config.get("temperature") == temperature and ("temperature" in config) == (temperature is not None)


@pytest.mark.parametrize("sdk", SDKS)
def test_usage_route_and_request_id(server: FakeLLMServer, sdk: str) -> None:
    server.queue(Text("abcdefgh"))
    completion = outcome(endpoint(sdk, server), ChatRequest("hello world", 10, 0.1)).completion
    assert completion.usage == Usage(tokens("hello world"), tokens("abcdefgh"))
    assert completion.model_route and completion.model_route.startswith(f"{sdk}-model")
    assert completion.request_id
    if sdk == "openai":
        assert completion.raw["system_fingerprint"] == "fp_fake"


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("reply, status", [(Refusal(), "refused"), (Empty(), "empty"), (Text(" \n"), "empty")])
def test_refusal_and_empty_are_answers_not_retried(server: FakeLLMServer, sdk: str, reply, status: str) -> None:
    server.queue(reply)
    result = outcome(endpoint(sdk, server), ChatRequest("q", 10))
    assert result.completion.status == status and result.attempts == 1 and server.count() == 1


def test_gemini_blocked_prompt_is_a_refusal(server: FakeLLMServer) -> None:
    server.queue(Raw({"promptFeedback": {"blockReason": "SAFETY"},
                      "usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 1}}))
    assert outcome(endpoint("gemini", server), ChatRequest("q", 10)).completion.status == "refused"


@pytest.mark.parametrize("sdk", SDKS)
def test_retry_after_honoured_and_capped(server: FakeLLMServer, sdk: str) -> None:
    server.queue(Error(429, retry_after=0.1), Error(429, retry_after=500), Text("fine"))
    result = outcome(endpoint(sdk, server), ChatRequest("q", 10))
    assert result.completion.text == "fine" and result.attempts == 3 == server.count()
    assert result.waits == [pytest.approx(0.1), FAST_RETRY["retry_after_cap"]]


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("status", [500, 503, 408])
def test_transient_errors_retried_at_most_five_times(server: FakeLLMServer, sdk: str, status: int) -> None:
    server.responder = lambda r: Error(status, "try later")
    result = outcome(endpoint(sdk, server), ChatRequest("q", 10))
    assert result.error.kind == "transient" and result.attempts == 6 == server.count()


def test_anthropic_overloaded_529_is_transient(server: FakeLLMServer) -> None:
    server.queue(Error(529, "overloaded"), Text("ok"))
    result = outcome(endpoint("anthropic", server), ChatRequest("q", 10))
    assert result.completion.text == "ok" and result.attempts == 2 == server.count()


@pytest.mark.parametrize("sdk", SDKS)
def test_timeouts_are_transient(server: FakeLLMServer, sdk: str) -> None:
    server.responder = lambda r: Hang(5)
    policy = RetryPolicy(**FAST_RETRY | {"max_retries": 2})
    result = outcome(endpoint(sdk, server, timeout=0.3), ChatRequest("q", 10), policy)
    assert result.error.kind == "transient" and result.attempts == 3 == server.count()


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize(("status", "kind"), [(400, "permanent"), (401, "endpoint"), (403, "endpoint"),
                                              (404, "endpoint"), (422, "permanent")])
def test_client_errors_are_permanent_and_not_retried(server: FakeLLMServer, sdk: str, status: int, kind: str) -> None:
    """The item's own 4xx is permanent; the endpoint's refusal of its own is apart
    (tests/test_endpoint_failures.py); neither is retried."""
    server.queue(Error(status, "no"))
    result = outcome(endpoint(sdk, server), ChatRequest("q", 10))
    assert result.error.kind == kind and result.error.status_code == status
    assert result.attempts == 1 == server.count()


@pytest.mark.parametrize("sdk", SDKS)
def test_context_length_error_keeps_message_and_suggests_probe(server: FakeLLMServer, sdk: str) -> None:
    server.max_prompt_chars = 5
    result = outcome(endpoint(sdk, server), ChatRequest("a longer prompt", 10))
    assert result.error.kind == "permanent" and "probe-window" in result.error.message
    assert result.attempts == 1


def test_anthropic_reasoning_budget_does_not_trip_the_sdk_guard(server: FakeLLMServer) -> None:
    result = outcome(endpoint("anthropic", server, timeout=600.0), ChatRequest("q", 32768))
    assert result.completion.text == "ok" and server.requests[0].body["max_tokens"] == 32768


def test_gemini_api_version_is_configurable(server: FakeLLMServer) -> None:
    outcome(endpoint("gemini", server, api_version="v1"), ChatRequest("q", 10))
    assert server.requests[0].path.startswith("/v1/models/gemini-model:generateContent")


@pytest.mark.parametrize("sdk", SDKS)
def test_system_prompt_and_json_schema_use_each_sdks_field(server: FakeLLMServer, sdk: str) -> None:
    schema = {"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]}
    outcome(endpoint(sdk, server), ChatRequest("q", 10, None, system="be strict", json_schema=schema))
    body = server.requests[0].body
    if sdk == "openai":
        assert body["messages"][0] == {"role": "system", "content": "be strict"}
        assert body["response_format"]["json_schema"]["schema"] == schema
    elif sdk == "anthropic":
        assert body["system"] == "be strict"
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    else:
        config = body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        assert config["responseJsonSchema"] == schema
        assert body["systemInstruction"]["parts"] == [{"text": "be strict"}]


@pytest.mark.parametrize("sdk", SDKS)
@pytest.mark.parametrize("budget", [64, 32768])   # live and streamed (a budget above 16,384 streams)
def test_a_conversation_is_sent_as_the_sdks_own_message_list(server: FakeLLMServer, sdk: str, budget: int) -> None:
    history = (Turn("user", "What is 2+2?"), Turn("assistant", "4."))
    outcome(endpoint(sdk, server), ChatRequest("And times 3?", budget, None, system="be brief", history=history))
    body = server.requests[0].body
    if sdk == "openai":
        assert body["messages"] == [{"role": "system", "content": "be brief"},
                                    {"role": "user", "content": "What is 2+2?"},
                                    {"role": "assistant", "content": "4."},
                                    {"role": "user", "content": "And times 3?"}]
    elif sdk == "anthropic":
        assert body["system"] == "be brief"
        assert body["messages"] == [{"role": "user", "content": "What is 2+2?"},
                                    {"role": "assistant", "content": "4."},
                                    {"role": "user", "content": "And times 3?"}]
    else:
        assert body["systemInstruction"]["parts"] == [{"text": "be brief"}]
        assert body["contents"] == [{"role": "user", "parts": [{"text": "What is 2+2?"}]},
                                    {"role": "model", "parts": [{"text": "4."}]},
                                    {"role": "user", "parts": [{"text": "And times 3?"}]}]


@pytest.mark.parametrize("history, problem", [
    ((Turn("assistant", "hi"),), "history[0]: expected role 'user', got 'assistant'"),
    ((Turn("user", "a"), Turn("user", "b")), "history[1]: expected role 'assistant', got 'user'"),
    ((Turn("user", "a"),), "ends with a user turn"),
])
def test_a_history_that_no_api_accepts_is_refused_in_one_line(history, problem) -> None:
    with pytest.raises(ValueError, match=re.escape(problem)):
        ChatRequest("q", 10, history=history)


# --- the command provider -------------------------------------------------------------------

def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "llm.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


def command_endpoint(argv: list[str], timeout: float = 5.0) -> EndpointConfig:
    return EndpointConfig(provider="command", name="local-llm", command=argv, concurrency=1,
                          timeout=timeout)


def test_command_gets_the_prompt_unchanged_on_stdin(tmp_path: Path) -> None:
    argv = script(tmp_path, """
        import os, sys
        prompt = sys.stdin.read()
        sys.stdout.write(prompt + "|" + os.environ["EVALNB_TEMPERATURE"] + "|" + os.environ["EVALNB_MAX_TOKENS"])
    """)
    prompt = "Q: $(rm -rf /); `id` && echo $HOME | cat > /tmp/x 'quoted' \"dq\" *.txt \\ 中文\n"
    result = outcome(command_endpoint(argv), ChatRequest(prompt, 77, None))
    assert result.completion.text == prompt + "||77"
    assert result.completion.status == "ok" and result.completion.model_route == f"command:{Path(argv[0]).name} {Path(argv[1]).name}"


def test_command_nonzero_exit_is_transient_with_stderr_kept(tmp_path: Path) -> None:
    argv = script(tmp_path, """
        import sys
        sys.stderr.write("model crashed: CUDA out of memory")
        sys.exit(3)
    """)
    result = outcome(command_endpoint(argv), ChatRequest("q", 10), RetryPolicy(**FAST_RETRY | {"max_retries": 1}))
    assert result.error.kind == "transient" and result.attempts == 2
    assert "exited 3" in result.error.message and "CUDA out of memory" in result.error.message


def test_command_that_hangs_times_out(tmp_path: Path) -> None:
    argv = script(tmp_path, "import time; time.sleep(30)")
    result = outcome(command_endpoint(argv, timeout=0.5), ChatRequest("q", 10),
                     RetryPolicy(**FAST_RETRY | {"max_retries": 1}))
    assert result.error.kind == "transient" and "timed out" in result.error.message and result.attempts == 2


def test_command_missing_program_is_permanent(tmp_path: Path) -> None:
    result = outcome(command_endpoint([str(tmp_path / "nope")]), ChatRequest("q", 10))
    assert result.error.kind == "permanent" and result.attempts == 1


def test_command_empty_output_is_empty(tmp_path: Path) -> None:
    argv = script(tmp_path, "import sys; sys.stdin.read()")
    assert outcome(command_endpoint(argv), ChatRequest("q", 10)).completion.status == "empty"


@pytest.mark.parametrize("sdk", SDKS)
def test_a_key_echoed_in_an_error_is_redacted(server: FakeLLMServer, sdk: str) -> None:
    server.queue(Error(401, "Incorrect API key provided: sk-" + "live-abcdefghijklmnopqrstuvwxyz0123"))
    error = outcome(endpoint(sdk, server), ChatRequest("q", 10)).error
    assert error.kind == "endpoint" and "[redacted]" in error.message and "sk-live" not in error.message


def test_every_sdk_client_shares_one_verifying_tls_context(tmp_path: Path) -> None:
    """One CA load per process, not one per client (a panel of three judges rebuilt it every
    stage); the shared context verifies exactly as the SDKs' own default would."""
    import ssl
    import subprocess

    from evalnb.providers.base import shared_tls_context

    context = shared_tls_context()
    assert context is shared_tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    # SSL_CERT_FILE is honoured as the SDKs honour it: a bundle of one CA trusts that one alone.
    import os
    import re

    bundle = Path(ssl.get_default_verify_paths().openssl_cafile)   # the system's CAs
    first = re.search(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", bundle.read_text(), re.S)
    assert first is not None
    one = tmp_path / "one-ca.pem"
    one.write_text(first.group(0) + "\n")
    script = ("from evalnb.providers.base import shared_tls_context as c; "
              "print(c().cert_store_stats()['x509_ca'])")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         env={**os.environ, "SSL_CERT_FILE": str(one)})
    assert out.stdout.split() == ["1"]
