"""WildTrace's prompts, verbatim from the protocol (§1 and §4), and how each is filled.

The contestant's prompt is its single user turn: the question and the whole document. The
judge's prompt truncates the question, each rubric criterion and the response to the lengths
the release's grader applies. Both templates' texts are hashed into the fingerprint
(:func:`prompt_texts`): runs whose prompts differ are not comparable.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalnb.benchmarks.wildtrace.tasks import RubricItem
from evalnb.records import prompts

ANSWER_PROMPT = """Answer using ONLY the document below. Include every specific detail from the text.

Question: {question}

Document:
{document}"""

JUDGE_PROMPT = """STRICT grader. Only award points for SPECIFIC details present.
QUESTION: {question}
RUBRIC:
{rubric}
RESPONSE:
{response}
Reply JSON: {"points_awarded":[<pts>],"total":<sum>}"""

# The truncations the judge prompt applies to what it quotes.
JUDGE_QUESTION_CHARS = 600
JUDGE_CRITERION_CHARS = 260
JUDGE_RESPONSE_CHARS = 5000


def render_answer_prompt(question: str, document: str) -> str:
    """The contestant's single user turn: document and question only (the protocol's §1)."""
    # Concatenation instead of fill(): documents reach 2.85 million characters and the
    # template's only placeholders are these two, in this order.
    head, rest = ANSWER_PROMPT.split("{question}")
    mid, tail = rest.split("{document}")
    return head + question + mid + document + tail


def format_points(points: float) -> str:
    """Points as the release writes them: ``40``, not ``40.0``; ``2.5`` stays ``2.5``."""
    return str(int(points)) if float(points).is_integer() else repr(float(points))


def render_judge_prompt(question: str, rubric: Sequence[RubricItem], response: str) -> str:
    """The judge's prompt, its question, criteria and response truncated to the lengths above."""
    lines = "\n".join(
        f"P{i} ({format_points(item.points)}pts): {item.criterion[:JUDGE_CRITERION_CHARS]}"
        for i, item in enumerate(rubric, start=1)
    )
    return prompts.fill(JUDGE_PROMPT, {
        "question": question[:JUDGE_QUESTION_CHARS],
        "rubric": lines,
        "response": response[:JUDGE_RESPONSE_CHARS],
    })


def prompt_texts() -> dict[str, str]:
    """The templates whose text makes scores comparable (hashed into the fingerprint)."""
    return {"wildtrace_answer": ANSWER_PROMPT, "wildtrace_judge": JUDGE_PROMPT}
