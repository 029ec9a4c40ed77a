"""Probe a model's real context window in characters (protocol §3: "probe its real window").

A binary search on documents cut from the run's own corpus (:mod:`evalnb.pipeline.probe_text`),
separately for English and CJK text, sending the real answer prompt with a small output
budget and reading the provider's context-length errors; then one check with the run's own
budget. The result is a caps entry to put in the parameters: characters of this corpus's
text, which is what the run will send.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from evalnb.benchmarks.wildtrace.protocol import decoding, render_answer_prompt   # the run's real settings
from evalnb.core.tokens import CHARS_PER_TOKEN, CapKind
from evalnb.core.run_config import RunConfig
from evalnb.core.errors import EvalnbError
from evalnb.providers import make_provider
from evalnb.providers.base import ChatRequest, is_context_length_error
from evalnb.providers.retry import call_with_retries
from evalnb.views.progress import StageProgress
from evalnb.execution.runner import run_blocking
from evalnb.pipeline.probe_text import ProbeText, probe_texts

PROBE_QUESTION = "Reply with the single word OK."
PROBE_MAX_TOKENS = 16   # the probe's own output budget: enough for "OK", cheap to accept
BUDGET_STEPS, BUDGET_STEP = 5, 0.01   # how far below an estimated cap the probe looks for one that fits


def synthetic_document(kind: CapKind, chars: int, corpus: Path | None = None) -> str:
    """A probe document of exactly ``chars`` characters, cut from the corpus's own text
    (:mod:`evalnb.pipeline.probe_text`)."""
    return probe_texts(corpus)[kind].document(chars)


@dataclass(frozen=True)
class WindowProbe:
    kind: CapKind
    accepted_chars: int          # the longest document seen accepted (with the probe's output budget)
    rejected_chars: int | None   # the shortest seen rejected (None: the upper bound fitted)
    calls: int                   # every probe sent, the budget check included
    text_source: str = ""        # which text the probe documents were cut from
    max_tokens: int = 0          # the probe's output budget
    cap_chars: int | None = None         # the cap for the run: accepted_chars, or less where the
                                         # endpoint reserves the run's output budget from the window
    budget_check: str = ""       # what one request at accepted_chars with the run's budget got
    chars_per_token: float | None = None  # this text's characters per reported input token

    @property
    def cap(self) -> int:
        return self.accepted_chars if self.cap_chars is None else self.cap_chars

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
    """Probe the contestant's window for English and for CJK documents of the run's corpus.

    The search asks for ``max_tokens`` output tokens (default :data:`PROBE_MAX_TOKENS`): an
    accepted probe costs its prompt and a word, not the run's whole budget. Then one request
    at the longest accepted length with the run's own budget tells whether the endpoint
    reserves that budget from the window (OpenAI, Anthropic, vLLM) or not (llama.cpp's
    server shortens the budget; Gemini counts input alone). Where it does, the cap is the
    accepted length less the run's budget in this text's characters per token, measured from
    the input tokens the endpoint reported for the accepted probes (the protocol's figure where
    it reported none, and the result says so).
    """

    settings = decoding(config)["model"]
    run_budget = int(settings[config.model.token_param])
    probe_budget = min(max_tokens or PROBE_MAX_TOKENS, run_budget)
    bounds = upper or {"en": 4_000_000, "cjk": 1_500_000}
    texts = probe_texts(config.corpus)

    async def go() -> list[WindowProbe]:
        provider = make_provider(config.model)
        if provider is None:
            raise EvalnbError("model: the probe needs a model endpoint (provider is none)")
        rng = random.Random(0)
        try:
            results = []
            for kind in ("en", "cjk"):
                text = texts[kind]   # type: ignore[index]
                seen: list[tuple[int, int | None]] = []   # accepted (characters, reported input tokens)
                # At most max_calls probes and the budget checks; the bisection usually needs
                # fewer (the total is corrected when it stops).
                progress = StageProgress(f"probe {kind}", total=max_calls + 1 + BUDGET_STEPS,
                                         pending=max_calls + 1 + BUDGET_STEPS, desc=f"probe {kind}", unit="call")

                async def send(chars: int, budget: int, kind: CapKind = kind, text: ProbeText = text,
                               seen: list[tuple[int, int | None]] = seen, progress: StageProgress = progress) -> bool:
                    request = ChatRequest(render_answer_prompt(PROBE_QUESTION, text.document(chars)),
                                          max_tokens=budget, temperature=settings["temperature"])
                    outcome = await call_with_retries(provider, request, config.retry, rng, progress.backoff)
                    progress.finished("ok" if outcome.error is None else "rejected" if outcome.error.kind ==
                                      "permanent" else f"failed_{outcome.error.kind}")
                    if outcome.error is None:
                        usage = outcome.completion.usage if outcome.completion else None
                        seen.append((chars, usage.input_tokens if usage and not usage.estimated else None))
                        return True
                    if outcome.error.kind == "permanent" and is_context_length_error(
                            outcome.error.message, outcome.error.code):
                        return False
                    raise EvalnbError(f"probe stopped at {chars:,} {kind} characters: "
                                      f"{outcome.error.message}")

                try:
                    accepted, rejected, calls = await search_window(lambda n: send(n, probe_budget), bounds[kind],
                                                                    tolerance=tolerance, max_calls=max_calls)
                    per_token = chars_per_token(seen, kind)
                    cap, check = accepted, "not needed (the probe used the run's budget)"
                    if accepted and probe_budget < run_budget:
                        calls += 1
                        if await send(accepted, run_budget):
                            check = f"accepted with the run's budget ({run_budget:,} tokens)"
                        else:
                            reserved = (run_budget - probe_budget) * per_token[0]
                            cap = max(0, int(accepted - reserved))
                            # The estimate uses the text's mean characters a token; where the text
                            # near the edge runs denser, step down until the run's request fits.
                            steps = 0
                            while cap and steps < BUDGET_STEPS:
                                calls += 1
                                if await send(cap, run_budget):
                                    break
                                cap, steps = int(cap * (1 - BUDGET_STEP)), steps + 1
                            else:
                                cap = 0 if steps else cap
                            check = (f"refused with the run's budget ({run_budget:,} tokens): the endpoint "
                                     f"reserves it from the window; cap lowered by {accepted - cap:,} characters "
                                     f"at {per_token[0]:.2f} characters a token ({per_token[1]})"
                                     + (f" and {steps} step(s) of {BUDGET_STEP:.0%}" if steps else "")
                                     + ("" if cap else "; the run's budget does not fit this window"))
                finally:
                    progress.close(total=progress.snapshot.new)
                results.append(WindowProbe(kind, accepted, rejected, calls, text.source,   # type: ignore[arg-type]
                                           probe_budget, cap, check, per_token[0]))
            return results
        finally:
            await provider.aclose()

    return run_blocking(go)


def chars_per_token(seen: list[tuple[int, int | None]], kind: CapKind) -> tuple[float, str]:
    """Characters per input token of the probe text: the slope between the shortest and
    the longest accepted probes whose usage was reported (the prompt's own tokens cancel),
    else the protocol's figure for the script."""
    reported = sorted((chars, tokens) for chars, tokens in seen if tokens)
    if len(reported) >= 2 and reported[-1][1] > reported[0][1] and reported[-1][0] > reported[0][0]:
        (c0, t0), (c1, t1) = reported[0], reported[-1]
        return round((c1 - c0) / (t1 - t0), 3), "measured from the reported input tokens"   # type: ignore[operator]
    return CHARS_PER_TOKEN[kind], "the protocol's figure: the endpoint reported no input tokens"


def caps_entry(results: list[WindowProbe]) -> dict[str, int]:
    return {r.kind: r.cap for r in results}


def probe_record(config: RunConfig, results: list[WindowProbe]) -> dict[str, Any]:
    return {"model": config.model.name, "provider": config.model.provider,
            "caps": caps_entry(results),
            "probes": [asdict(r) | {"precision": r.precision} for r in results],
            "note": ("characters of this corpus's own text (text_source) that the run's answer prompt "
                     "can carry with the run's output budget; another corpus's text may run more or "
                     "fewer characters a token")}
