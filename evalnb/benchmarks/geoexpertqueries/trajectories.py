"""Agent trajectories (GeoExpertQueries): reading, converting and condensing to text.

The accepted shape is ``schemas/trace.schema.json``: ``{id, steps, final_response}`` with
steps of type ``message``, ``tool_call`` or ``code``. An OpenAI-style transcript
(``{id, messages}`` with assistant ``tool_calls`` and ``tool`` messages) is converted to it.
Condensation is deterministic: the same trajectory and limits always give the same text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from evalnb.core.data import Where, first_of_known, read_jsonl

DEFAULT_OUTPUT_CHARS = 2000
DEFAULT_TOTAL_CHARS = 24000


@cache
def trace_schema() -> dict[str, Any]:
    return json.loads(resources.files(__package__).joinpath("trace.schema.json").read_text("utf-8"))


def _field(error: jsonschema.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    return path.lstrip(".") or "(record)"


def from_openai_messages(raw: dict[str, Any], where: Where) -> dict[str, Any]:
    """An OpenAI-style transcript as a native trace: tool outputs joined to their calls."""
    messages = raw["messages"]
    if not isinstance(messages, list) or not messages:
        raise where.error("expected a non-empty list of messages", "messages")
    steps: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    assistant = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]
    last = assistant[-1] if assistant else None
    if last is None or messages[last].get("tool_calls"):
        raise where.error("no final assistant message without tool calls", "messages")
    final = ""
    seen_user = False
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise where.error("expected an object with a role", f"messages[{i}]")
        role, content = message["role"], message.get("content")
        if isinstance(content, list):   # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if role == "system" or (role == "user" and not seen_user):
            seen_user = seen_user or role == "user"   # the query itself: not part of the trajectory
            continue
        if role == "tool":
            call = calls.get(message.get("tool_call_id", ""))
            if call is None:
                raise where.error(f"tool message answers no earlier tool call "
                                  f"({message.get('tool_call_id')!r})", f"messages[{i}].tool_call_id")
            call["output"] = content or ""
            continue
        if i == last:
            final = content or ""
            continue
        tool_calls = message.get("tool_calls") or []
        if content:
            steps.append({"type": "message", "role": role, "content": content})
        for j, tc in enumerate(tool_calls):
            function = tc.get("function") if isinstance(tc, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise where.error("expected {function: {name, arguments}}", f"messages[{i}].tool_calls[{j}]")
            arguments = function.get("arguments", "")
            try:
                parsed = json.loads(arguments) if isinstance(arguments, str) and arguments else arguments
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):   # otherwise kept as the string the model wrote
                arguments = parsed
            step = {"type": "tool_call", "name": function["name"], "arguments": arguments, "output": None}
            if isinstance(tc.get("id"), str):
                step["id"] = tc["id"]
                calls[tc["id"]] = step
            steps.append(step)
    return {"id": raw["id"], "steps": steps, "final_response": final}


@dataclass(frozen=True)
class Traces:
    traces: dict[str, dict[str, Any]]
    unknown_ids: list[str]
    duplicate_ids: list[str]
    converted_ids: list[str]     # given as OpenAI-style transcripts


def read_traces(path: Path, query_ids: list[str], data: bytes | None = None) -> Traces:
    """Every line validated against the schema; errors name the line and the field.
    ``data``: the file's bytes, when already read."""
    validator = jsonschema.Draft202012Validator(trace_schema())
    known = set(query_ids)
    traces: dict[str, dict[str, Any]] = {}
    unknown: list[str] = []
    duplicates: list[str] = []
    converted: list[str] = []
    for line, raw in read_jsonl(path, data):
        where = Where(str(path), line)
        if isinstance(raw, dict) and "messages" in raw and "steps" not in raw:
            if "id" not in raw:
                raise where.error("missing", "id")
            raw = from_openai_messages(raw, Where(str(path), line, str(raw["id"])))
            converted.append(str(raw["id"]))
        error = jsonschema.exceptions.best_match(validator.iter_errors(raw))
        if error is not None:   # the most specific error (inside a step's own schema)
            task = str(raw["id"]) if isinstance(raw, dict) and "id" in raw else None
            raise Where(str(path), line, task).error(
                f"does not match the trace schema: {error.message}", _field(error))
        trace_id = str(raw["id"])
        if first_of_known(trace_id, known, traces, unknown, duplicates):
            traces[trace_id] = raw
    return Traces(traces, unknown, duplicates, converted)


MARKER_ROOM = 40   # characters reserved for the cut marker


def clip(text: str, limit: int) -> str:
    """The beginning and the end of ``text`` within ``limit`` characters, saying what was cut."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - MARKER_ROOM)
    head, tail = keep - keep // 2, keep // 2
    cut = len(text) - head - tail
    return text[:head] + f"\n[... {cut:,} characters cut ...]\n" + text[len(text) - tail:]


def _arguments(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def condense(trace: dict[str, Any], *, output_chars: int = DEFAULT_OUTPUT_CHARS,
             total_chars: int = DEFAULT_TOTAL_CHARS) -> str:
    """Numbered steps (tool name, arguments, outputs, code, messages), then the final response.

    Each argument list, code block and output keeps its beginning and end within
    ``output_chars``; the steps together keep theirs within what ``total_chars`` leaves
    after the final response, which is kept whole up to half of ``total_chars``.
    """
    blocks = []
    for n, step in enumerate(trace["steps"], start=1):
        if step["type"] == "tool_call":
            lines = [f"Step {n}: tool call {step['name']}",
                     f"Arguments: {clip(_arguments(step['arguments']), output_chars)}",
                     "Output:" if step.get("output") is not None else "Output: (none)"]
            if step.get("output") is not None:
                lines.append(clip(step["output"], output_chars))
        elif step["type"] == "code":
            lines = [f"Step {n}: code ({step.get('language', 'unknown language')})",
                     clip(step["code"], output_chars),
                     "Output:" if step.get("output") is not None else "Output: (none)"]
            if step.get("output") is not None:
                lines.append(clip(step["output"], output_chars))
        else:
            lines = [f"Step {n}: message from {step['role']}", clip(step["content"], output_chars)]
        blocks.append("\n".join(lines))
    final = "Final response:\n" + clip(trace["final_response"], total_chars // 2)
    steps_text = clip("\n\n".join(blocks), max(0, total_chars - len(final) - 2)) if blocks else "(no steps)"
    return f"{steps_text}\n\n{final}"
