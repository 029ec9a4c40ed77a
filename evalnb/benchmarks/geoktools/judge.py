"""GeoKTools' geospatial LLM judge: its user turn, its structured output, and its reply read.

The judge's system prompt is a file (the report's own can replace ours, shipped in
``prompts/``); the user turn below is ours, since the reference runner's is not published.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalnb.benchmarks.geoktools.scoring import parse_element_scores
from evalnb.records import prompts

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"   # our default prompt files
DEFAULT_JUDGE_PROMPT = "geoktools_judge_system.txt"

JUDGE_PROMPT = """QUESTION:
{query}

GOLDEN ANSWER:
{golden}

RESPONSE:
{response}"""

JUDGE_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "element_scores": {"type": "array", "items": {"type": "number"}},
        "score": {"type": "number"},
        "rationale": {"type": "string"},
    },
    "required": ["element_scores", "score", "rationale"],
    "additionalProperties": False,
}


def render_judge_prompt(query: str, golden: str, response: str) -> str:
    return prompts.fill(JUDGE_PROMPT, {"query": query, "golden": golden, "response": response})


def read_verdict(reply: str) -> tuple[float, dict[str, Any]]:
    """The judge's element scores and overall score, checked to agree."""
    score, elements = parse_element_scores(reply)
    return score, {"method": "judge", "element_scores": elements}
