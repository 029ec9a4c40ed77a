"""Offline baselines: run the whole pipeline with no key and no network.

They are approximations, labelled as such in every output; their numbers are not
comparable with the paper. Each sees exactly what a model would see, the rendered prompt,
and parses what it needs back out of it, so the real prompt and reply paths run.

- ``extractive-bm25``, a contestant: ranks the document's sentences against the question
  with BM25 and answers with the best three, in document order.
- ``lead-3``, a contestant: the document's first three sentences (a floor to compare with).
- ``rubric-overlap``, a judge: awards a rubric item's points when the response contains
  the item's numbers and most of its content words; replies in the judge's JSON shape.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

from evalnb.core.errors import ConfigError
from evalnb.providers.base import ChatRequest, Completion, status_of

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[a-z]+|[\u4e00-\u9fff]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n\s*\n")
_STOPWORDS = frozenset("""a an the and or of to in on at for by with from as is are was were be been
being it its this that these those which who whom what when where why how did does do done has have
had not no yes any all each every both than then there their them they he she his her our we you
your i me my into over under about after before between during per via also only include every
specific detail details document text answer using question name state give list""".split())


def _numbers_normalised(token: str) -> str:
    return token.replace(",", "") if token[0].isdigit() else token


def tokens(text: str) -> list[str]:
    """Lower-cased words and numbers (``1,250`` -> ``1250``); CJK runs as character bigrams."""
    out: list[str] = []
    for raw in _TOKEN.findall(text.lower()):
        if "\u4e00" <= raw[0] <= "\u9fff":
            out.extend(raw[i:i + 2] for i in range(max(1, len(raw) - 1)))
        else:
            out.append(_numbers_normalised(raw))
    return out


def content_tokens(text: str) -> list[str]:
    """Tokens that carry content: not stopwords, and (for Latin words) longer than two letters."""
    return [t for t in tokens(text)
            if t not in _STOPWORDS and (len(t) > 2 or not t.isascii() or t[0].isdigit())]


def split_sentences(document: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(document) if s and s.strip()]


def bm25_top(question: str, document: str, k: int = 3, k1: float = 1.5, b: float = 0.75) -> list[str]:
    """The ``k`` best-matching sentences, in document order (none when nothing matches)."""
    sentences = split_sentences(document)
    query = set(content_tokens(question))
    if not sentences or not query:
        return []
    bags = [Counter(tokens(s)) for s in sentences]
    mean_len = sum(sum(b_.values()) for b_ in bags) / len(bags)
    df = Counter(t for bag in bags for t in query if t in bag)
    idf = {t: math.log(1 + (len(bags) - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    scores = []
    for i, bag in enumerate(bags):
        length = sum(bag.values())
        s = sum(idf[t] * bag[t] * (k1 + 1) / (bag[t] + k1 * (1 - b + b * length / mean_len))
                for t in idf if t in bag)
        if s > 0:
            scores.append((s, i))
    best = sorted(i for _, i in sorted(scores, reverse=True)[:k])
    return [sentences[i] for i in best]


def _section(prompt: str, start: str, end: str | None) -> str:
    head = prompt.index(start) + len(start)
    return prompt[head:prompt.index(end, head)] if end else prompt[head:]


class ExtractiveContestant:
    """``extractive-bm25``: the best three sentences; ``lead-3``: the first three (a floor)."""

    makes_no_model_call = True   # no tokens, no usage to estimate (providers.retry.usage_or_estimate)

    def __init__(self, model: str, concurrency: int) -> None:
        self.model, self.concurrency = model, concurrency

    async def complete(self, request: ChatRequest) -> Completion:
        question = _section(request.prompt, "Question: ", "\n\nDocument:\n")
        document = _section(request.prompt, "\n\nDocument:\n", None)
        chosen = split_sentences(document)[:3] if self.model == "lead-3" else bm25_top(question, document)
        text = " ".join(chosen)
        return Completion(text=text, status=status_of(text), finish_reason="stop",
                          model_route=f"offline/{self.model}")

    async def aclose(self) -> None:
        return None


_RUBRIC_LINE = re.compile(r"^P(\d+) \(([\d.]+)pts\): (.*)$", re.M)


def item_covered(criterion: str, response_tokens: set[str], share: float = 0.6) -> bool:
    """Every number of the item, and at least ``share`` of its other content words."""
    wanted = content_tokens(criterion)
    if not wanted:
        return False
    numbers = [t for t in wanted if t[0].isdigit()]
    words = [t for t in wanted if not t[0].isdigit()]
    if any(n not in response_tokens for n in numbers):
        return False
    return not words or sum(w in response_tokens for w in words) / len(words) >= share


class RubricOverlapJudge:
    makes_no_model_call = True   # no tokens, no usage to estimate (providers.retry.usage_or_estimate)

    def __init__(self, model: str, concurrency: int, share: float = 0.6) -> None:
        self.model, self.concurrency, self.share = model, concurrency, share

    async def complete(self, request: ChatRequest) -> Completion:
        rubric = _section(request.prompt, "\nRUBRIC:\n", "\nRESPONSE:\n")
        response = _section(request.prompt, "\nRESPONSE:\n", "\nReply JSON: ")
        have = set(tokens(response))
        awarded = [float(points) if item_covered(criterion, have, self.share) else 0.0
                   for _, points, criterion in _RUBRIC_LINE.findall(rubric)]
        awarded_clean = [int(p) if p.is_integer() else p for p in awarded]
        text = json.dumps({"points_awarded": awarded_clean, "total": sum(awarded_clean)})
        return Completion(text=text, status="ok", finish_reason="stop",
                          model_route=f"offline/{self.model}")

    async def aclose(self) -> None:
        return None


# Three judges that differ in how much of an item's wording they demand, so that an offline
# panel shows disagreement the way a real one does.
JUDGE_SHARES = {"rubric-overlap": 0.6, "rubric-overlap-strict": 0.8, "rubric-overlap-lenient": 0.4}
OFFLINE_MODELS = ("extractive-bm25", "lead-3", *JUDGE_SHARES)


def offline_provider(model: str, concurrency: int) -> ExtractiveContestant | RubricOverlapJudge:
    if model in ("extractive-bm25", "lead-3"):
        return ExtractiveContestant(model, concurrency)
    if model in JUDGE_SHARES:
        return RubricOverlapJudge(model, concurrency, JUDGE_SHARES[model])
    raise ConfigError(f"offline provider has no model {model!r}; choose one of {', '.join(OFFLINE_MODELS)}")
