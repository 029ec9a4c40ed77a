"""A run's resolved parameters: plain, frozen, secret-free dataclasses that every layer reads.

:mod:`evalnb.config` reads and checks a parameters file into these; nothing here parses.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evalnb.core.errors import ConfigError
from evalnb.core.types import RetryPolicy


@dataclass(frozen=True)
class QuietDefault:
    """A benchmark option's default that is left out of the resolved options (and so of
    config.json and scores.json) while in force: adding such an option to a benchmark changes
    nothing a run that does not use it records (a benchmark's ``repeats: 1``). The benchmark reads
    it with ``config.options.get(key, default)``."""

    value: Any

    def is_default(self, given: Any) -> bool:
        # the type too: True == 1, but ``repeats: true`` must reach the benchmark's check
        return type(given) is type(self.value) and given == self.value


@dataclass(frozen=True)
class EndpointConfig:
    """One model endpoint: the contestant or a judge."""

    provider: str
    name: str
    base_url: str | None = None
    api_key_env: str | None = None     # the NAME of the variable holding the key
    reasoning: bool = False            # the protocol's larger budget for reasoning models (its benchmark says how large)
    send_temperature: bool = True      # False for models that reject temperature
    caps: dict[str, int] | None = None  # {en, cjk} characters; wins over the caps table
    concurrency: int | None = None     # default: the run's concurrency
    timeout: float = 600.0             # seconds per attempt
    token_param: str = "max_tokens"    # OpenAI reasoning models want max_completion_tokens
    api_version: str | None = None     # gemini: v1beta by default
    command: list[str] | None = None   # command provider: argv, prompt on stdin
    env: list[str] | None = None       # command provider: variables passed on besides the basics
    rate_limit: dict[str, float] | None = None   # {requests,input_tokens,output_tokens}_per_minute
    approximation: bool = False        # a stand-in, not a model (e.g. an example rater): label outputs
    mode: str = "live"                 # live, or batch: through the provider's batch API (evalnb.execution.batch)
    batch: dict[str, Any] | None = None   # batch mode options: resend, max_requests, max_bytes
    stream: str | bool = "auto"        # transport only: auto streams budgets over 16,384 and reasoning models
    stream_idle_timeout: float = 120.0   # streamed: seconds of silence between events that end an attempt
    max_call_seconds: float = 3600.0   # streamed: seconds one attempt may take in all
    strip_think: bool = False          # drop a leading <think>...</think> from the response
    family: str | None = None          # free text (anthropic, qwen ...): for the judges' self-preference; no call changes, not fingerprinted
    role: str = "model"                # where it sits in the parameters, for messages


@dataclass(frozen=True)
class RunConfig:
    """A run's resolved parameters, checked and secret-free. A benchmark reads ``data`` (its
    data file, an absolute path), ``options`` (its own ``OPTIONS`` keys, resolved: paths in
    ``PATH_OPTIONS`` made absolute), ``model`` (the contestant's endpoint), ``judges`` and
    :meth:`judge_roles`, and raises :meth:`error` for a bad option. Keys are never in it: only
    the names of the variables that hold them."""

    benchmark: str
    run_name: str
    output_dir: Path
    data: Path
    corpus: Path | None
    concurrency: int
    model: EndpointConfig
    judges: tuple[EndpointConfig, ...]
    retry: RetryPolicy = RetryPolicy()
    prices: dict[str, dict[str, float]] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)   # benchmark-specific keys
    source: str = "parameters"   # the parameters file, for messages (not a parameter itself)
    budget: dict[str, Any] | None = None   # the spending ceiling (evalnb.execution.budget); not fingerprinted
    subset: dict[str, Any] | None = None   # part of the data only (evalnb.core.subset); fingerprinted
    judge_retest: dict[str, int] | None = None   # {sample, repeats, seed}: evalnb.judges.retest; not fingerprinted
    cache: dict[str, Any] | None = None   # the response cache (evalnb.core.cache_options); not fingerprinted

    def error(self, key: str, problem: str) -> ConfigError:
        """A configuration error naming the parameters file and the key."""
        return ConfigError(f"{self.source}: {key}: {problem}")

    def judge_roles(self) -> list[tuple[str, EndpointConfig]]:
        """``("judge1", endpoint), ...``: the keys judge records and provider pools use."""
        return [(f"judge{i}", judge) for i, judge in enumerate(self.judges, start=1)]

    def response_parts(self) -> dict[str, Any]:
        """Fingerprint parts from endpoint settings that change what a response is
        (``strip_think``), beside the benchmark's own parts: the contestant's (a judge's is in
        the shared part's judge panel). Present only when set, so a run that sets none keeps
        the fingerprint it had before the setting existed. ``stream`` is transport and is no
        part of it."""
        return {"strip_think": ["model"]} if self.model.strip_think else {}

    @property
    def offline(self) -> bool:
        """True when any role is an offline baseline: numbers not comparable with the paper."""
        return any(e.provider == "offline" or e.approximation for e in (self.model, *self.judges))

    def to_dict(self) -> dict[str, Any]:
        """Fully resolved and secret-free: what papermill injects and scores.json records."""
        def endpoint(e: EndpointConfig) -> dict[str, Any]:
            # family only where given, so a run that sets none keeps the config.json it had
            return {k: v for k, v in asdict(e).items() if k != "role" and not (k == "family" and v is None)}
        return {
            "benchmark": self.benchmark, "run_name": self.run_name,
            "output_dir": str(self.output_dir), "data": str(self.data),
            "corpus": str(self.corpus) if self.corpus else None,
            "concurrency": self.concurrency, "model": endpoint(self.model),
            "judges": [endpoint(j) for j in self.judges], "retry": asdict(self.retry),
            "prices": self.prices, **({"budget": self.budget} if self.budget else {}),
            **({"subset": self.subset} if self.subset else {}),
            **({"judge_retest": self.judge_retest} if self.judge_retest else {}),
            **({"cache": self.cache} if self.cache else {}),
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in self.options.items()},
        }
