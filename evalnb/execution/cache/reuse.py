"""The runner's use of the cache: look a call's request up before it is sent, keep its
final answer after.

Only final outcomes are kept: a reply (an answer, a refusal, an empty reply) whose record
the stage counts as done. A transient or endpoint failure, and a reply the stage would ask
again (a judge's reply without a usable verdict), are never kept, so they are never served.
A call a benchmark marks ``cached=False`` (the judge retest study's, which measure the
judges' own noise) neither reads nor writes the cache.

A reused answer costs nothing and makes no attempt: its record has ``attempts: 0`` (so the
spending ceiling and the usage tables count it as no call) and a ``cache`` field with the
original call's time, route, usage and run, and the digest of the answer it reused.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from evalnb.core.run_config import EndpointConfig
from evalnb.core.types import Call, ChatRequest, Completion, Latency, Usage
from evalnb.execution.cache.keys import EndpointIdentity, identity_of, reply_reading, request_key, wire_body
from evalnb.execution.cache.settings import CacheSettings
from evalnb.execution.cache.store import CacheStore, Damaged

DAY_SECONDS = 86400.0


@dataclass(frozen=True)
class Lookup:
    """A cacheable call's key and endpoint."""

    key: str
    identity: EndpointIdentity


@dataclass(frozen=True)
class Reused:
    """A cached answer: the completion as first read, and what the record says of its origin."""

    completion: Completion
    origin: dict[str, Any]


def text_digest(text: str | None) -> str:
    return hashlib.sha256((text or "").encode("utf-8", "surrogatepass")).hexdigest()


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


def completion_content(completion: Completion) -> dict[str, Any]:
    return asdict(completion)


def completion_from(content: Mapping[str, Any]) -> Completion:
    fields = dict(content)
    usage, latency = fields.pop("usage", None), fields.pop("latency", None)
    return Completion(**fields, usage=Usage(**usage) if usage else None,
                      latency=Latency(**latency) if latency else None)


@dataclass
class CallCache:
    """One stage's view of the cache: which endpoints use it, what it met (damaged entries,
    write failures), and how many answers it gave and kept in this process."""

    settings: CacheSettings
    endpoints: Mapping[str, EndpointConfig]
    run: str
    damaged: list[Damaged] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    reused: int = 0
    kept: int = 0

    def __post_init__(self) -> None:
        self.store = CacheStore(self.settings.root)
        self.identities = {role: identity for role, e in self.endpoints.items()
                           if role not in self.settings.fresh and (identity := identity_of(e)) is not None}

    def lookup(self, call: Call, provider: Any, request: ChatRequest) -> Lookup | None:
        """The call's key, None when the call is never cached (its endpoint, its benchmark's mark)."""
        identity = self.identities.get(call.endpoint)
        if identity is None or not call.cached:
            return None
        body = wire_body(provider, request)
        if body is None:
            return None
        return Lookup(request_key(identity, body, reply_reading(provider, request), call.sample), identity)

    def reuse(self, lookup: Lookup) -> Reused | None:
        """The stored answer for the key, when there is one that may be served."""
        try:
            content = self.store.get(lookup.key)
        except OSError as error:
            self.problem(f"response cache: {self.settings.root}: cannot be read ({type(error).__name__}: {error})")
            return None
        if isinstance(content, Damaged):
            self.damaged.append(content)
            return None
        if content is None:
            return None
        called_at = float(content.get("called_at") or 0.0)
        if self.settings.max_age_days is not None and time.time() - called_at > self.settings.max_age_days * DAY_SECONDS:
            return None   # too old for this run: called again, and the new answer replaces it
        try:
            completion = completion_from(content["completion"])
        except (KeyError, TypeError) as error:
            self.damaged.append(Damaged(self.store.path_of(lookup.key), f"not a completion ({error})"))
            return None
        try:
            self.store.count_hit(lookup.key)
        except OSError:
            pass   # the count is a convenience; the record is what declares the reuse
        self.reused += 1
        origin = {"hit": True, "key": lookup.key, "called_at": iso(called_at), "run": content.get("run"),
                  "route": completion.model_route, "answer_sha256": text_digest(completion.text)}
        return Reused(completion, origin)

    def keep(self, lookup: Lookup, completion: Completion, called_at: float) -> None:
        """Store a final answer (whole or not at all); a cache that cannot be written is said once."""
        content = {"endpoint": lookup.identity.as_dict(), "called_at": called_at, "run": self.run,
                   "completion": completion_content(completion)}
        try:
            self.store.put(lookup.key, content)
            self.kept += 1
        except OSError as error:
            self.problem(f"response cache: {self.settings.root}: cannot be written ({type(error).__name__}: {error}); "
                         "answers are recorded in the run as usual")

    def problem(self, line: str) -> None:
        if line not in self.problems:
            self.problems.append(line)

    def report_lines(self) -> list[str]:
        """What the stage should say about the cache: damaged entries skipped, failures to read or write."""
        return [d.line() for d in self.damaged] + self.problems
