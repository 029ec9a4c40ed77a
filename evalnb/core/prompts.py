"""Every prompt template evalnb sends, in one place.

The WildTrace templates are verbatim from the protocol (spec §1 and §4). Placeholders are
filled in a single pass, so a question that happens to contain ``{document}`` is sent as
written and never expanded twice.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

WILDTRACE_ANSWER_PROMPT = """Answer using ONLY the document below. Include every specific detail from the text.

Question: {question}

Document:
{document}"""

WILDTRACE_JUDGE_PROMPT = """STRICT grader. Only award points for SPECIFIC details present.
QUESTION: {question}
RUBRIC:
{rubric}
RESPONSE:
{response}
Reply JSON: {"points_awarded":[<pts>],"total":<sum>}"""

# Spec README reading 7: the truncations the judge prompt applies.
JUDGE_QUESTION_CHARS = 600
JUDGE_CRITERION_CHARS = 260
JUDGE_RESPONSE_CHARS = 5000

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(template: str, values: Mapping[str, str]) -> str:
    """Replace ``{name}`` for the names given, once, leaving every other brace alone."""
    return _PLACEHOLDER.sub(lambda m: values[m[1]] if m[1] in values else m[0], template)


def render_answer_prompt(question: str, document: str) -> str:
    """The contestant's single user turn: document and question only (spec §1)."""
    # Concatenation instead of fill(): documents reach 2.85 million characters and the
    # template's only placeholders are these two, in this order.
    head, rest = WILDTRACE_ANSWER_PROMPT.split("{question}")
    mid, tail = rest.split("{document}")
    return head + question + mid + document + tail


class RubricLine(Protocol):
    @property
    def points(self) -> float: ...

    @property
    def criterion(self) -> str: ...


def format_points(points: float) -> str:
    """Points as the release writes them: ``40``, not ``40.0``; ``2.5`` stays ``2.5``."""
    return str(int(points)) if float(points).is_integer() else repr(float(points))


def render_judge_prompt(question: str, rubric: Sequence[RubricLine], response: str) -> str:
    """The judge's prompt, truncating question, criteria and response as reading 7 says."""
    lines = "\n".join(
        f"P{i} ({format_points(item.points)}pts): {item.criterion[:JUDGE_CRITERION_CHARS]}"
        for i, item in enumerate(rubric, start=1)
    )
    return fill(WILDTRACE_JUDGE_PROMPT, {
        "question": question[:JUDGE_QUESTION_CHARS],
        "rubric": lines,
        "response": response[:JUDGE_RESPONSE_CHARS],
    })


# GeoKTools: the judge's system prompt is a file (the report's own can replace ours); the
# user turn below is ours, since the reference runner's is not published.
GEOKTOOLS_JUDGE_PROMPT = """QUESTION:
{query}

GOLDEN ANSWER:
{golden}

RESPONSE:
{response}"""

GEOKTOOLS_JUDGE_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "element_scores": {"type": "array", "items": {"type": "number"}},
        "score": {"type": "number"},
        "rationale": {"type": "string"},
    },
    "required": ["element_scores", "score", "rationale"],
    "additionalProperties": False,
}

@dataclass(frozen=True)
class PromptFile:
    path: Path
    text: str
    sha256: str

    def record(self) -> dict[str, str]:
        return {"path": str(self.path), "sha256": self.sha256}


def read_prompt_file(path: Path | None, default: Path) -> PromptFile:
    """A prompt file (the official one when given, else ours, ``default``), with its hash for the record."""
    target = path or default
    try:
        data = target.read_bytes()
    except FileNotFoundError:
        from evalnb.core.errors import ConfigError
        raise ConfigError(f"prompt file not found: {target}") from None
    return PromptFile(target, data.decode("utf-8"), hashlib.sha256(data).hexdigest())


def render_geoktools_judge_prompt(query: str, golden: str, response: str) -> str:
    return fill(GEOKTOOLS_JUDGE_PROMPT, {"query": query, "golden": golden, "response": response})


def prompt_texts() -> dict[str, str]:
    """The templates whose text makes scores comparable (hashed into the fingerprint)."""
    return {"wildtrace_answer": WILDTRACE_ANSWER_PROMPT, "wildtrace_judge": WILDTRACE_JUDGE_PROMPT}
