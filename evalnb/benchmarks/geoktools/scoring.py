"""Structured answers (GeoKTools): exact match and the deterministic offline scorer.

The decisions are stated in docs/protocols/geoktools.md. An answer is a bracketed JSON list; the golden answer
is one too, and anything else there is a data error. Decisions where the
protocol is silent, each tested:

- JSON equality is typed: a boolean equals only a boolean, numbers compare by
  value (``6650 == 6650.0``), strings only strings.
- The golden element's JSON type decides how it is scored. A golden number is scored with
  the tolerance; on the prediction side a number, or a string holding only a plain decimal
  number (``"877"``, ``"-1.5e3"``; not ``"nan"``, ``"1,000"`` or ``"877 km"``), counts as
  that number. A golden string is scored by ROUGE-L even when it holds digits (``"2024"``,
  ``"10115"``): the dataset's authors typed it as text, and years, codes and identifiers
  must not match within 10 %. A non-string prediction against a golden string is compared
  through its JSON text (``877`` as ``"877"``).
- A golden element that is neither a number nor a string (a list, object, boolean, null)
  scores 1 on typed JSON equality, else 0.
- An empty golden list scores 1 when the prediction's list is empty too, else 0.
- ROUGE-L is the ``rouge-score`` package's F1 with its default tokenizer: lower-cased, then
  only ``[a-z0-9]+`` runs survive. A golden string with no such run (``"北京"``) scores 0
  unless the whole response is an exact match; ``rouge_blind`` finds them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache
from typing import Any

from rouge_score import rouge_scorer, tokenizers

from evalnb.core.replies import JudgeReplyError, as_number, field_of

TOLERANCE = 0.10
_decoder = json.JSONDecoder()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality with JSON's types: ``true`` is not ``1`` (Python says it is)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _loads(text: str) -> Any:
    """``json.loads``; ValueError covers integers past Python's digit limit and RecursionError
    too-deep nesting, both of which a model can write."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def exact_match(response: str, golden: str) -> bool:
    """Equal after strip(), or both parse as JSON and are equal."""
    a, b = response.strip(), golden.strip()
    if a == b:
        return True
    try:
        return json_equal(_loads(a), _loads(b))
    except ValueError:
        return False


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def golden_list(raw: str) -> list[Any]:
    """The golden answer, which must be a JSON list and nothing else.

    Raises ValueError saying what is wrong; NaN, Infinity and numbers too large for a float
    are refused, since no prediction could be scored against them.
    """
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at character {e.pos}); expected a JSON list") from None
    if not isinstance(value, list):
        raise ValueError(f"expected a JSON list, got a JSON {type(value).__name__}: {raw.strip()[:80]!r}")
    for i, element in enumerate(value):
        if _is_number(element) and not math.isfinite(_as_float(element)):
            raise ValueError(f"element {i} is not a finite number")
    return value


def last_json_list(text: str) -> list[Any] | None:
    """The last top-level bracketed JSON list in ``text`` (scanning left to right)."""
    found: list[Any] | None = None
    i = text.find("[")
    while i != -1:
        try:
            value, end = _decoder.raw_decode(text, i)
        except (ValueError, RecursionError):   # not JSON here, or not a value Python can hold
            i = text.find("[", i + 1)
            continue
        found = value
        i = text.find("[", end)
    return found


def _as_float(value: int | float) -> float:
    try:
        return float(value)
    except OverflowError:   # an integer beyond float range
        return math.inf


def numeric_rule(predicted: Any, golden: float) -> tuple[float, str]:
    """The deterministic scorer for a golden number: the element's score and the rule that gave it."""
    p = as_number(predicted)
    if p is None:
        return 0.0, "not a number"
    if golden == 0:
        return (1.0, "exact (golden 0)") if p == 0 else (0.0, "golden 0, not equal")
    error = abs(p - golden) / abs(golden)
    return (1.0, "within 10%") if error <= TOLERANCE else (max(0.0, 1.0 - error), "1 - relative error")


def numeric_score(predicted: Any, golden: float) -> float:
    return numeric_rule(predicted, golden)[0]


@cache
def _rouge() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rougeL"])


@cache
def _tokenizer() -> tokenizers.DefaultTokenizer:
    return tokenizers.DefaultTokenizer(use_stemmer=False)   # what RougeScorer(["rougeL"]) uses


def rouge_blind(text: str) -> bool:
    """True when rouge-score's default tokenizer finds no token in ``text``."""
    return not _tokenizer().tokenize(text)


def string_score(predicted: Any, golden: str) -> float:
    text = predicted if isinstance(predicted, str) else json.dumps(predicted, ensure_ascii=False)
    return float(_rouge().score(golden, text)["rougeL"].fmeasure)


def element_rule(predicted: Any, golden: Any) -> tuple[float, str]:
    """One element's score and the rule that produced it (for the evidence views)."""
    if _is_number(golden):
        return numeric_rule(predicted, _as_float(golden))
    if isinstance(golden, str):
        return string_score(predicted, golden), "ROUGE-L"
    return (1.0, "JSON equal") if json_equal(predicted, golden) else (0.0, "JSON not equal")


def element_score(predicted: Any, golden: Any) -> float:
    return element_rule(predicted, golden)[0]


def explain(response: str, golden_raw: str) -> tuple[list[Any] | None, list[tuple[int, Any, Any, float, str]]]:
    """The list parsed from ``response`` and, per golden element, ``(index, golden, predicted,
    score, rule)``: what :func:`deterministic_score` computed, element by element."""
    predicted, golden = last_json_list(response), golden_list(golden_raw)
    rows: list[tuple[int, Any, Any, float, str]] = []
    for i, g in enumerate(golden):
        if predicted is None:
            rows.append((i, g, None, 0.0, "no parsable list"))
        elif i >= len(predicted):
            rows.append((i, g, None, 0.0, "missing"))
        else:
            rows.append((i, g, predicted[i], *element_rule(predicted[i], g)))
    return predicted, rows


def deterministic_score(response: str, golden_raw: str) -> tuple[float, list[float] | None]:
    """``(case score, element scores)``; no parsable list scores 0.

    ``golden_raw`` has passed :func:`golden_list` when the data was loaded.
    """
    predicted, rows = explain(response, golden_raw)
    if predicted is None:
        return 0.0, None
    if not rows:
        return (1.0 if not predicted else 0.0), []
    scores = [score for _, _, _, score, _ in rows]
    return sum(scores) / len(scores), scores


# --- golden strings a reader should know about (where ROUGE-L is blind; the numeric-string decision) ------

ROUGE_BLIND_NOTE = ("rouge-score's default tokenizer lower-cases the text and keeps only [a-z0-9] runs; "
                    "these golden strings have none, so ROUGE-L scores them 0 and only an exact match "
                    "of the whole response scores them 1. Scores there are the protocol's, "
                    "kept as they are.")
NUMERIC_STRING_NOTE = ("golden strings holding a plain number: scored by ROUGE-L as text (the golden's JSON "
                       "type decides), not within the 10% tolerance")
EXAMPLES = 5


def golden_string_notes(goldens: Mapping[str, tuple[int, str]]) -> dict[str, Any]:
    """From ``{case_id: (K, golden_answer_raw)}``: the golden string elements ROUGE-L cannot
    see, and those holding a plain number, each with count, cases, examples and every element."""
    blind: list[dict[str, Any]] = []
    numeric: list[dict[str, Any]] = []
    for case_id, (k, raw) in goldens.items():
        for index, element in enumerate(golden_list(raw)):
            if not isinstance(element, str):
                continue
            entry = {"case_id": case_id, "K": k, "index": index, "text": element}
            if rouge_blind(element):
                blind.append(entry)
            elif as_number(element) is not None:
                numeric.append(entry)

    def summary(entries: list[dict[str, Any]], note: str) -> dict[str, Any]:
        examples = list(dict.fromkeys(e["text"] for e in entries))[:EXAMPLES]
        return {"count": len(entries), "cases": len({e["case_id"] for e in entries}),
                "examples": examples, "note": note, "elements": entries}
    return {"rouge_blind_golden_strings": summary(blind, ROUGE_BLIND_NOTE),
            "golden_numeric_strings": summary(numeric, NUMERIC_STRING_NOTE)}


# --- the LLM judge's reply ----------------------------------------------------------------------

ELEMENT_AGREEMENT = 0.01   # an overall score must equal the mean of its element scores


def parse_element_scores(reply: str) -> tuple[float, list[float]]:
    """``score`` in [0, 1] and ``element_scores``, a list of numbers in [0, 1] whose mean it is."""
    score_value, verdict = field_of(reply, "score")
    score = as_number(score_value)
    elements = verdict.get("element_scores")
    if score is None or not 0 <= score <= 1:
        raise JudgeReplyError(f"'score' is not a number in [0, 1]: {score_value!r}")
    values = [as_number(x) for x in elements] if isinstance(elements, list) else None
    if values is None or any(v is None or not 0 <= v <= 1 for v in values):
        raise JudgeReplyError("'element_scores' is not a list of numbers in [0, 1]")
    numbers = [float(v or 0.0) for v in values]
    if numbers and abs(sum(numbers) / len(numbers) - score) > ELEMENT_AGREEMENT:
        raise JudgeReplyError(f"'score' {score} is not the mean of 'element_scores' {numbers}")
    return score, numbers
