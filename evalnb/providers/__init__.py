"""Provider construction: one place maps a configured endpoint to its client; beside it, one
module per provider's API and the shared request, reply and usage rules.

May import :mod:`evalnb.core`, :mod:`evalnb.stats`, :mod:`evalnb.views` and :mod:`evalnb.records`;
:mod:`evalnb.config` and every layer above it may import it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from evalnb.providers.streams.base import settings_of

if TYPE_CHECKING:
    from evalnb.core.run_config import EndpointConfig
    from evalnb.providers.base import Provider


@dataclass(frozen=True)
class ProviderSpec:
    """What the other layers may ask of a provider name, without importing its SDK."""

    module: str | None     # the module that makes its client (None: no client)
    batch: bool = False    # has a batch API that ``mode: batch`` can use (evalnb.execution.batch)
    needs_key: bool = True  # calls need the key variable the endpoint names
    costs: bool = True     # calls cost money unless priced otherwise (offline, command: free)


# The one table of providers. Each module is imported only when a run uses it (``import
# openai`` alone takes about a second), and then ahead of time, by :func:`prefetch`.
REGISTRY: dict[str, ProviderSpec] = {
    "openai": ProviderSpec("evalnb.providers.openai_compat", batch=True),
    "anthropic": ProviderSpec("evalnb.providers.anthropic_messages", batch=True),
    "gemini": ProviderSpec("evalnb.providers.gemini", batch=True),
    "command": ProviderSpec("evalnb.providers.command", needs_key=False, costs=False),
    "offline": ProviderSpec("evalnb.providers.offline", needs_key=False, costs=False),
    "none": ProviderSpec(None, needs_key=False, costs=False),   # answers come from a file
}
PROVIDERS = tuple(REGISTRY)
BATCH_PROVIDERS = tuple(name for name, spec in REGISTRY.items() if spec.batch)
# Through their SDKs' streaming APIs, and so with stream and strip_think settings.
STREAMING_PROVIDERS = BATCH_PROVIDERS


def modules_for(endpoints: Iterable[EndpointConfig]) -> list[str]:
    return sorted({m for e in endpoints if (m := REGISTRY[e.provider].module) is not None})


def prefetch(endpoints: Iterable[EndpointConfig]) -> None:
    """Import the SDKs these endpoints need on a background thread while the run is checked,
    so that the first call of a stage does not wait for them; then, once the first reply is
    stored, pandas (the stages return their tables as DataFrames), which would otherwise delay
    the first request by as long again. A client is made only once the SDKs are in
    (:func:`make_provider` waits): two threads importing one package at once can leave it
    half-initialised (Python breaks an import deadlock that way)."""
    import importlib
    import threading

    global _sdks_in
    sdks = [m for m in modules_for(endpoints) if m not in sys.modules]
    if not sdks and "pandas" in sys.modules:
        return
    ready = _sdks_in = threading.Event()

    def load() -> None:
        from evalnb.core.events import FIRST_REPLY

        try:
            for module in sdks:
                importlib.import_module(module)
        finally:
            ready.set()
        if FIRST_REPLY.wait(PANDAS_AFTER):
            importlib.import_module("pandas")

    threading.Thread(target=load, name="evalnb-prefetch", daemon=True).start()


PANDAS_AFTER = 60.0   # seconds the prefetch waits at most for a first reply before giving up on pandas
_sdks_in: Any = None   # threading.Event of the latest prefetch: set once its SDK imports are done


def make_provider(endpoint: EndpointConfig) -> Provider | None:
    """The endpoint's client, paced to its ``rate_limit`` when it has one, in the window every
    process of the user shares for that endpoint (:mod:`evalnb.providers.ledger`)."""
    provider = _client_for(endpoint)
    if provider is None or endpoint.rate_limit is None:
        return provider
    from evalnb.providers.ledger import QuotaLedger, endpoint_identity
    from evalnb.providers.pacing import ARRIVAL_BOUND_SECONDS, PacedProvider, Pacer, RateLimit
    e = endpoint
    shared = QuotaLedger(endpoint_identity(e.provider, e.base_url, e.name, e.api_key_env))
    return PacedProvider(provider, Pacer(RateLimit(**endpoint.rate_limit), name=e.role, shared=shared,
                                         arrival_bound=ARRIVAL_BOUND_SECONDS))


def _client_for(endpoint: EndpointConfig) -> Provider | None:
    """SDKs are imported only when a run uses them; ``provider: none`` has no client."""
    if _sdks_in is not None:
        _sdks_in.wait()   # a prefetch is importing them: never import one from two threads
    concurrency = endpoint.concurrency or 1
    e = endpoint
    stream = settings_of(endpoint)   # streaming is transport: when a call streams, its limits; think blocks
    if endpoint.provider == "openai":
        from evalnb.providers.openai_compat import OpenAIProvider
        return OpenAIProvider(e.name, base_url=e.base_url, api_key_env=e.api_key_env, concurrency=concurrency,
                              timeout=e.timeout, token_param=e.token_param, role=e.role,
                              observe_quota=e.rate_limit is not None, stream=stream)
    if endpoint.provider == "anthropic":
        from evalnb.providers.anthropic_messages import AnthropicProvider
        return AnthropicProvider(e.name, base_url=e.base_url, api_key_env=e.api_key_env, concurrency=concurrency,
                                 timeout=e.timeout, role=e.role, observe_quota=e.rate_limit is not None,
                                 stream=stream)
    if endpoint.provider == "gemini":
        from evalnb.providers.gemini import GeminiProvider
        return GeminiProvider(e.name, base_url=e.base_url, api_key_env=e.api_key_env, concurrency=concurrency,
                              timeout=e.timeout, api_version=e.api_version, role=e.role, stream=stream)
    if endpoint.provider == "command":
        from evalnb.providers.command import CommandProvider
        assert endpoint.command is not None   # checked with the parameters
        passed = [*(endpoint.env or ()), *([endpoint.api_key_env] if endpoint.api_key_env else [])]
        return CommandProvider(endpoint.name, endpoint.command, concurrency=concurrency,
                               timeout=endpoint.timeout, passed_env=passed)
    if endpoint.provider == "none":
        return None
    from evalnb.providers.offline import offline_provider
    return offline_provider(endpoint.name, concurrency)
