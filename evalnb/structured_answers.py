"""Structured answers (GeoKTools): exact match and the deterministic offline scorer.

Spec README readings 12 and 13. An answer is a bracketed JSON list; the golden answer is
one too. Decisions where the reading is silent, each tested:

- A prediction element that is a string holding a plain number counts as that number.
- A golden element that is neither a number nor a string (a list, object, boolean, null)
  scores 1 on JSON equality, else 0.
- An empty golden list scores 1 when the prediction's list is empty too, else 0.
- ROUGE-L is the ``rouge-score`` package's F1 with its default tokenizer (lower-cased
  ASCII letters and digits; text with none of those scores 0).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from rouge_score import rouge_scorer

from evalnb.judging import embedded_json

TOLERANCE = 0.10


def exact_match(response: str, golden: str) -> bool:
    """Reading 12: equal after strip(), or both parse as JSON and are equal."""
    a, b = response.strip(), golden.strip()
    if a == b:
        return True
    try:
        return json.loads(a) == json.loads(b)
    except json.JSONDecodeError:
        return False


def last_json_list(text: str) -> list[Any] | None:
    """The last top-level bracketed JSON list in ``text`` (scanning left to right)."""
    lists = embedded_json(text, "[")
    return lists[-1] if lists else None


def as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def numeric_score(predicted: Any, golden: float) -> float:
    p = as_number(predicted)
    if p is None:
        return 0.0
    if golden == 0:
        return 1.0 if p == 0 else 0.0
    error = abs(p - golden) / abs(golden)
    return 1.0 if error <= TOLERANCE else max(0.0, 1.0 - error)


@cache
def _rouge() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rougeL"])


def string_score(predicted: Any, golden: str) -> float:
    text = predicted if isinstance(predicted, str) else json.dumps(predicted)
    return float(_rouge().score(golden, text)["rougeL"].fmeasure)


def element_score(predicted: Any, golden: Any) -> float:
    if isinstance(golden, (int, float)) and not isinstance(golden, bool):
        return numeric_score(predicted, float(golden))
    if isinstance(golden, str):
        return string_score(predicted, golden)
    return 1.0 if predicted == golden else 0.0


def deterministic_score(response: str, golden_raw: str) -> tuple[float, list[float] | None]:
    """Reading 13: ``(case score, element scores)``; no parsable list scores 0."""
    predicted, golden = last_json_list(response), last_json_list(golden_raw)
    if predicted is None or golden is None:
        return 0.0, None
    if not golden:
        return (1.0 if not predicted else 0.0), []
    scores = [element_score(predicted[i], g) if i < len(predicted) else 0.0
              for i, g in enumerate(golden)]
    return sum(scores) / len(scores), scores
