"""One class per provider's batch API, over the official SDK client of the live provider:
:mod:`.openai_batches`, :mod:`.anthropic_batches`, :mod:`.gemini_batches` (what they share,
the :class:`Backend` interface, is in :mod:`.backend_base`).

Each backend builds a batched request from the live provider's own request builder
(``OpenAIProvider.request_body``, ``AnthropicProvider.request_kwargs``,
``GeminiProvider.contents`` + ``generation_config``) and reads each result with the live
provider's own reply reader (``completion_of``), so a batched call sends and records exactly
what a live call would. A failure inside a batch becomes the same classified
:class:`ProviderError` a live call would raise: an HTTP status is classified by
:func:`evalnb.providers.base.http_error`; an expired, cancelled or missing request is
transient.
"""

from __future__ import annotations

from typing import Any

from evalnb.execution.batch.anthropic_batches import AnthropicBatches
from evalnb.execution.batch.backend_base import Backend
from evalnb.execution.batch.gemini_batches import GeminiBatches
from evalnb.execution.batch.openai_batches import OpenAIBatches


def backend_for(provider: str, live: Any) -> Backend:
    """The batch API of ``provider``, over the live provider ``live`` (its client and builders)."""
    if provider == "openai":
        return OpenAIBatches(live)
    if provider == "anthropic":
        return AnthropicBatches(live)
    if provider == "gemini":
        return GeminiBatches(live)
    raise ValueError(f"no batch API for provider {provider!r}")
