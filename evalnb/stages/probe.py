"""Probe a model's real context window in characters (spec §3: "probe its real window").

A binary search on synthetic documents, separately for English and CJK text, sending the
real answer prompt with the run's real token budget, and reading the provider's
context-length errors. The result is a caps entry to put in the parameters.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from typing import Any

from evalnb.benchmarks.wildtrace.protocol import decoding, render_answer_prompt   # the run's real settings
from evalnb.core.tokens import CapKind
from evalnb.core.run_config import RunConfig
from evalnb.core.errors import EvalnbError
from evalnb.providers import make_provider
from evalnb.providers.base import ChatRequest, is_context_length_error
from evalnb.providers.retry import call_with_retries
from evalnb.core.progress import StageProgress
from evalnb.execution.runner import run_blocking

PROBE_QUESTION = "Reply with the single word OK."
_EN_WORDS = ("the harbour authority reported that cargo volumes rose in the third quarter while "
             "maintenance of the northern breakwater continued under budget").split()
_CJK_TEXT = "港口管理局报告第三季度货物吞吐量上升北部防波堤维护工程继续在预算内进行"


def synthetic_document(kind: CapKind, chars: int) -> str:
    """Deterministic filler of exactly ``chars`` characters (the probe records that length)."""
    if kind == "cjk":
        return (_CJK_TEXT * (chars // len(_CJK_TEXT) + 1))[:chars]
    rng = random.Random(0)
    words: list[str] = []
    joined = -1   # length of " ".join(words): n words have n - 1 separators
    while joined < chars:
        words.append(rng.choice(_EN_WORDS))
        joined += len(words[-1]) + 1
    return " ".join(words)[:chars]


@dataclass(frozen=True)
class WindowProbe:
    kind: CapKind
    accepted_chars: int          # the longest document seen accepted
    rejected_chars: int | None   # the shortest seen rejected (None: the upper bound fitted)
    calls: int

    @property
    def precision(self) -> float | None:
        if self.rejected_chars is None or not self.accepted_chars:
            return None
        return (self.rejected_chars - self.accepted_chars) / self.accepted_chars


async def search_window(fits: Callable[[int], Awaitable[bool]], upper: int, *,
                        tolerance: float = 0.005, max_calls: int = 40) -> tuple[int, int | None, int]:
    """Largest n in [0, upper] with ``fits(n)``, as ``(accepted, rejected, calls)``.

    Stops when the gap between the longest accepted and the shortest rejected length is
    within ``tolerance`` of the accepted one, or after ``max_calls`` probes.
    """
    calls = 1
    if await fits(upper):
        return upper, None, calls
    low, high = 0, upper
    while high - low > max(1, tolerance * low) and calls < max_calls:
        middle = (low + high) // 2 if low else max(1, high // 8)   # find a foothold quickly
        calls += 1
        if await fits(middle):
            low = middle
        else:
            high = middle
    return low, high, calls


def probe_window(config: RunConfig, *, upper: dict[str, int] | None = None,
                 tolerance: float = 0.005, max_calls: int = 40,
                 max_tokens: int | None = None) -> list[WindowProbe]:
    """Probe the contestant's window for English and for CJK documents.

    ``max_tokens`` defaults to the run's own completion budget, because the budget is
    reserved from the same window when the run sends its documents.
    """

    settings = decoding(config)["model"]
    bounds = upper or {"en": 4_000_000, "cjk": 1_500_000}

    async def go() -> list[WindowProbe]:
        provider = make_provider(config.model)
        if provider is None:
            raise EvalnbError("model: the probe needs a model endpoint (provider is none)")
        rng = random.Random(0)
        try:
            results = []
            for kind in ("en", "cjk"):
                # At most max_calls probes; the bisection usually needs fewer (the total is
                # corrected when it stops).
                progress = StageProgress(f"probe {kind}", total=max_calls, pending=max_calls,
                                         desc=f"probe {kind}", unit="call")

                async def fits(chars: int, kind: CapKind = kind, progress: StageProgress = progress) -> bool:
                    request = ChatRequest(
                        render_answer_prompt(PROBE_QUESTION, synthetic_document(kind, chars)),
                        max_tokens=max_tokens or settings[config.model.token_param],
                        temperature=settings["temperature"])
                    outcome = await call_with_retries(provider, request, config.retry, rng, progress.backoff)
                    progress.finished("ok" if outcome.error is None else "rejected" if outcome.error.kind ==
                                      "permanent" else f"failed_{outcome.error.kind}")
                    if outcome.error is None:
                        return True
                    if outcome.error.kind == "permanent" and is_context_length_error(
                            outcome.error.message, outcome.error.code):
                        return False
                    raise EvalnbError(f"probe stopped at {chars:,} {kind} characters: "
                                      f"{outcome.error.message}")

                try:
                    accepted, rejected, calls = await search_window(fits, bounds[kind],
                                                                    tolerance=tolerance, max_calls=max_calls)
                finally:
                    progress.close(total=progress.snapshot.new)
                results.append(WindowProbe(kind, accepted, rejected, calls))   # type: ignore[arg-type]
            return results
        finally:
            await provider.aclose()

    return run_blocking(go)


def caps_entry(results: list[WindowProbe]) -> dict[str, int]:
    return {r.kind: r.accepted_chars for r in results}


def probe_record(config: RunConfig, results: list[WindowProbe]) -> dict[str, Any]:
    return {"model": config.model.name, "provider": config.model.provider,
            "caps": caps_entry(results),
            "probes": [asdict(r) | {"precision": r.precision} for r in results],
            "note": "document characters accepted with the run's answer prompt and token budget"}
