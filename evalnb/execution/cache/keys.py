"""The cache's key: a SHA-256 of everything that can change a reply, and nothing else.

What goes into a key (as canonical JSON, hashed; none of it is stored in the key or the entry):

- the provider and its wire format (``openai`` chat completions, ``anthropic`` messages,
  ``gemini`` generateContent) and the endpoint's base URL (None: the SDK's default host);
- the request body exactly as the provider builds it for its SDK: the model, the messages
  (the whole prompt, every byte), the temperature, the token budget under the name it is
  sent by, the response format; per-attempt transport settings (the SDK's timeout) are not
  part of the body and are left out;
- whether the call streams, and whether a leading think block is stripped from the reply:
  both change what the provider returns or what evalnb reads from it;
- the sample's index: a protocol that draws several samples of one request (repeats of a
  contestant, an autorater's runs) gets one entry per sample, so K repeats stay K
  independent calls, never one answer K times.

A key never holds a credential: the key variable's name and value are not in it, so two
users of one cache with different keys for one endpoint share answers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from evalnb.core.run_config import EndpointConfig
from evalnb.core.types import ChatRequest

WIRE_FORMATS = {"openai": "openai.chat.completions", "anthropic": "anthropic.messages",
                "gemini": "gemini.generateContent"}
"""The providers whose replies are cached. ``command`` (a program on this machine) and the
offline baselines cost nothing and answer from outside any request body: never cached."""
KEY_VERSION = 1
TRANSPORT_ONLY = frozenset({"timeout"})   # request arguments that are no part of the body sent


@dataclass(frozen=True)
class EndpointIdentity:
    """Where a request goes: what an entry records of its endpoint (for pruning by endpoint)."""

    provider: str
    base_url: str | None
    model: str

    def as_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "base_url": self.base_url, "model": self.model}


def identity_of(endpoint: EndpointConfig) -> EndpointIdentity | None:
    """The endpoint's identity, None for a provider whose replies are never cached."""
    if endpoint.provider not in WIRE_FORMATS:
        return None
    base = endpoint.base_url.rstrip("/") if endpoint.base_url else None
    return EndpointIdentity(endpoint.provider, base, endpoint.name)


def innermost(provider: Any) -> Any:
    """The SDK provider inside the wrappers (pacing, the spending ceiling, the endpoint gate)."""
    while hasattr(provider, "inner"):
        provider = provider.inner
    return provider


def wire_body(provider: Any, request: ChatRequest) -> dict[str, Any] | None:
    """The body the provider sends for ``request``, as plain JSON; None when it builds none."""
    sdk = innermost(provider)
    if hasattr(sdk, "request_body"):   # openai
        body: dict[str, Any] = sdk.request_body(request)
        return body
    if hasattr(sdk, "request_kwargs"):   # anthropic
        return {k: v for k, v in sdk.request_kwargs(request).items() if k not in TRANSPORT_ONLY}
    if hasattr(sdk, "generation_config") and hasattr(sdk, "contents"):   # gemini
        return {"model": sdk.model,
                "contents": [c.model_dump(mode="json", exclude_none=True) for c in sdk.contents(request)],
                "config": sdk.generation_config(request).model_dump(mode="json", exclude_none=True)}
    return None


def reply_reading(provider: Any, request: ChatRequest) -> dict[str, bool]:
    """How the reply is fetched and read: streamed or not, think block stripped or not."""
    settings = getattr(innermost(provider), "stream", None)
    if settings is None:
        return {"stream": False, "strip_think": False}
    return {"stream": bool(settings.streams(request)), "strip_think": bool(settings.strip_think)}


def request_key(identity: EndpointIdentity, body: dict[str, Any], reading: dict[str, bool], sample: int) -> str:
    """The entry's key (64 hex digits): the SHA-256 of the material as canonical JSON (sorted
    keys, no spaces, UTF-8), so the same request always gives the same key, in any process."""
    material = {"v": KEY_VERSION, "wire": WIRE_FORMATS[identity.provider], **identity.as_dict(),
                "body": body, **reading, "sample": sample}
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
