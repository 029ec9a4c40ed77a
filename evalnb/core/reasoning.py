"""Reasoning kept apart from the answer.

The protocol's ``response`` is the answer text. Reasoning a provider returns apart from it
(OpenAI-compatible ``reasoning_content``, Anthropic ``thinking`` blocks, Gemini thought
parts) goes into the call's record as ``reasoning`` and never into the text the judges see.

An inline ``<think>...</think>`` block at the very start of the answer text (a server
without a reasoning parser sends one) is the model's response as sent, and is kept unless
the endpoint sets ``strip_think: true``; stripped, it becomes the record's reasoning. Either
way the record says so (``think_block``: ``kept`` or ``stripped``) and the run counts them.
Only a block that opens the text (after whitespace) counts: ``<think>`` later in an answer is
answer text. A block never closed (the budget ran out while thinking) runs to the end of the
text, so stripped it leaves no answer: ``empty``, with the length stop recorded.

What a record keeps of the reasoning: its length always, and its text (through the secret
filter) up to :data:`REASONING_KEPT` characters; a longer reasoning keeps its first two
thirds and its last third around a marker saying how many characters were left out, since
its opening shows the approach and its end leads into the answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from evalnb.core.redaction import redact
from evalnb.core.types import Completion, Passage

REASONING_KEPT = 20_000   # characters of reasoning text a record keeps (the length is always kept)
THINK_OPEN = re.compile(r"\A\s*<think>", re.IGNORECASE)
THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)


def split_think(text: str) -> tuple[str, str] | None:
    """``(think, answer)`` when ``text`` begins with a ``<think>`` block, else None."""
    opening = THINK_OPEN.match(text)
    if opening is None:
        return None
    closing = THINK_CLOSE.search(text, opening.end())
    if closing is None:   # never closed: everything is reasoning
        return text[opening.end():].strip(), ""
    return text[opening.end():closing.start()].strip(), text[closing.end():].lstrip()


def joined(*parts: str | None) -> str | None:
    """Reasoning from more than one source (provider field, stripped block), in order."""
    kept = [p for p in parts if p]
    return "\n\n".join(kept) if kept else None


def reasoning_field(text: str | None) -> dict[str, Any] | None:
    """What a record keeps of a completion's reasoning (None: it had none)."""
    if not text:
        return None
    kept = text
    if len(text) > REASONING_KEPT:
        head, tail = text[: REASONING_KEPT * 2 // 3], text[-(REASONING_KEPT - REASONING_KEPT * 2 // 3):]
        kept = f"{head}\n[... {len(text) - len(head) - len(tail):,} characters of reasoning not kept ...]\n{tail}"
    return {"chars": len(text), "text": redact(kept), "truncated": len(text) > REASONING_KEPT}


def reasoning_fields(completion: Completion) -> dict[str, Any]:
    """A completion's reasoning and think block, as its record keeps them (nothing without)."""
    fields: dict[str, Any] = {}
    kept = reasoning_field(completion.reasoning)
    if kept is not None:
        fields["reasoning"] = kept
    if completion.think_block is not None:
        fields["think_block"] = completion.think_block
    return fields


def reasoning_passages(record: Mapping[str, Any] | None, prefix: str = "") -> list[Passage]:
    """The evidence of a record's reasoning: one passage, folded by default (none without)."""
    field = (record or {}).get("reasoning")
    if not isinstance(field, Mapping):
        return []
    note = f", {field.get('chars', 0):,} characters returned, shortened to what the record keeps" \
        if field.get("truncated") else ""
    return [Passage(f"{prefix}reasoning (apart from the response, not seen by the judges{note})",
                    field.get("text"), collapsed=True)]


def reasoning_summary(names: Mapping[str, str], stores: Mapping[str, Mapping[str, Any]]
                      ) -> dict[str, dict[str, dict[str, int]]]:
    """Per stage and model (``names``: endpoint -> model), over the calls made: how many
    returned reasoning apart (and its characters in all), and how many responses began with
    a think block, kept and stripped."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for stage, records in stores.items():
        rows: dict[str, dict[str, int]] = {}
        for record in records.values():
            if not record.get("attempts"):
                continue   # decided without a call
            model = names.get(str(record["endpoint"]), str(record["endpoint"]))
            row = rows.setdefault(model, {"calls": 0, "with_reasoning": 0, "reasoning_chars": 0,
                                          "think_block_kept": 0, "think_block_stripped": 0})
            row["calls"] += 1
            field = record.get("reasoning")
            if isinstance(field, Mapping):
                row["with_reasoning"] += 1
                row["reasoning_chars"] += int(field.get("chars") or 0)
            if record.get("think_block") in ("kept", "stripped"):
                row[f"think_block_{record['think_block']}"] += 1
        out[stage] = dict(sorted(rows.items()))
    return out
