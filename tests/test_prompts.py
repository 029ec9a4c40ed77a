"""The exact prompt texts of the WildTrace protocol (§1, §4) and the judge prompt's truncations."""

from evalnb.benchmarks.wildtrace import protocol as prompts
from evalnb.benchmarks.wildtrace.tasks import RubricItem

ANSWER_EXPECTED = (
    "Answer using ONLY the document below. Include every specific detail from the text.\n"
    "\n"
    "Question: Who?\n"
    "\n"
    "Document:\n"
    "The doc."
)


def test_answer_prompt_is_verbatim() -> None:
    assert prompts.render_answer_prompt("Who?", "The doc.") == ANSWER_EXPECTED


def test_answer_prompt_fills_once() -> None:
    # A question that contains a placeholder is sent as written, never expanded again.
    text = prompts.render_answer_prompt("What is {document}?", "D {question}")
    assert text.endswith("Question: What is {document}?\n\nDocument:\nD {question}")


def test_judge_prompt_exact_with_truncations() -> None:
    question = "q" * 700
    rubric = [RubricItem(40, "a" * 300), RubricItem(35.0, "short"), RubricItem(2.5, "half")]
    response = "r" * 6000
    expected = (
        "STRICT grader. Only award points for SPECIFIC details present.\n"
        f"QUESTION: {'q' * 600}\n"
        "RUBRIC:\n"
        f"P1 (40pts): {'a' * 260}\n"
        "P2 (35pts): short\n"
        "P3 (2.5pts): half\n"
        "RESPONSE:\n"
        f"{'r' * 5000}\n"
        'Reply JSON: {"points_awarded":[<pts>],"total":<sum>}'
    )
    assert prompts.render_judge_prompt(question, rubric, response) == expected


def test_judge_prompt_keeps_braces_in_response() -> None:
    text = prompts.render_judge_prompt("Q", [RubricItem(100, "c")], 'resp {"total": 100} {rubric}')
    assert 'RESPONSE:\nresp {"total": 100} {rubric}\nReply JSON:' in text
