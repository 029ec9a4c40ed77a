"""The other side of endpoint failures: a connection that was made and then lost reached the provider.

A raw TCP server on 127.0.0.1 reads each request whole and then resets the connection (RST)
or closes it (FIN) before any response. Through the real SDKs: the failure is transient,
named ``connection dropped`` with the SDK's own words, and billed at its upper bound, since
the provider may have done the work. openai's and anthropic's aiohttp transport raises httpx's
``ConnectTimeout`` for both (seen against llama.cpp's server in CI, where it was reported as
"could not connect" and not billed); aiohttp's own error says the connection was made.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from tests.test_endpoint_failures import SDKS, endpoint, outcome
from evalnb.providers.retry import RetryPolicy


def _serve(listener: socket.socket, reset: bool, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except OSError:   # the listener was closed: the test is over
            return
        with conn:
            conn.settimeout(5.0)
            data = b""
            while b"\r\n\r\n" not in data:   # the request's headers; its body follows in the buffer
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            if reset:   # SO_LINGER 0: close() sends RST instead of FIN
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@pytest.fixture(params=["reset", "closed"])
def dropping_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()
    worker = threading.Thread(target=_serve, args=(listener, request.param == "reset", stop), daemon=True)
    worker.start()
    port = listener.getsockname()[1]
    try:
        yield request.param, f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        listener.close()
        worker.join(timeout=5.0)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("sdk", SDKS)
def test_a_connection_lost_after_the_request_is_transient_named_and_billed(
        dropping_server: tuple[str, str], sdk: str, stream: bool) -> None:
    how, url = dropping_server
    result = outcome(endpoint(sdk, url, stream=stream), RetryPolicy(max_retries=1, base_delay=0.01))
    assert result.completion is None and result.error is not None
    error = result.error
    assert error.kind == "transient" and error.code == "connection_dropped" and error.reached, error.as_dict()
    words = "Connection reset by peer" if how == "reset" else "Server disconnected"
    assert error.message.startswith("connection dropped") and words in error.message, error.message
    if sdk != "gemini":   # google-genai's aiohttp error carries no address; the Stainless SDKs' does
        assert f"by {url.removeprefix('http://')}" in error.message, error.message
    assert result.attempts == 2 and len(result.failed_usage) == 2   # both attempts may have been billed
    assert all(u["basis"].startswith("upper bound") for u in result.failed_usage)
    print(f"{sdk} {'streamed' if stream else 'whole'}, {how}: {error.message}")
