"""Provider construction: one place maps a configured endpoint to its client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalnb.errors import ConfigError

if TYPE_CHECKING:   # config imports the retry policy, which imports providers.base
    from evalnb.config import EndpointConfig
    from evalnb.providers.base import Provider


def make_provider(endpoint: EndpointConfig) -> Provider:
    concurrency = endpoint.concurrency or 1
    if endpoint.provider == "offline":
        from evalnb.providers.offline import offline_provider
        return offline_provider(endpoint.name, concurrency)
    if endpoint.provider == "openai":
        from evalnb.providers.openai_compat import OpenAIProvider
        return OpenAIProvider(endpoint.name, base_url=endpoint.base_url,
                              api_key_env=endpoint.api_key_env, concurrency=concurrency,
                              timeout=endpoint.timeout, token_param=endpoint.token_param,
                              role=endpoint.role)
    raise ConfigError(f"{endpoint.role}.provider: {endpoint.provider!r} is not available yet")
