"""Provider construction: one place maps a configured endpoint to its client."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:   # config imports the retry policy, which imports providers.base
    from evalnb.config import EndpointConfig
    from evalnb.providers.base import Provider


def make_provider(endpoint: EndpointConfig) -> Provider | None:
    """SDKs are imported only when a run uses them; ``provider: none`` has no client."""
    concurrency = endpoint.concurrency or 1
    common = {"base_url": endpoint.base_url, "api_key_env": endpoint.api_key_env,
              "concurrency": concurrency, "timeout": endpoint.timeout, "role": endpoint.role}
    if endpoint.provider == "openai":
        from evalnb.providers.openai_compat import OpenAIProvider
        return OpenAIProvider(endpoint.name, token_param=endpoint.token_param, **common)
    if endpoint.provider == "anthropic":
        from evalnb.providers.anthropic_messages import AnthropicProvider
        return AnthropicProvider(endpoint.name, **common)
    if endpoint.provider == "gemini":
        from evalnb.providers.gemini import GeminiProvider
        return GeminiProvider(endpoint.name, api_version=endpoint.api_version, **common)
    if endpoint.provider == "command":
        from evalnb.providers.command import CommandProvider
        assert endpoint.command is not None   # checked with the parameters
        return CommandProvider(endpoint.name, endpoint.command, concurrency=concurrency,
                               timeout=endpoint.timeout)
    if endpoint.provider == "none":
        return None
    from evalnb.providers.offline import offline_provider
    return offline_provider(endpoint.name, concurrency)
