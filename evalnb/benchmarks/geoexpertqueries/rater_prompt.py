"""The GeoExpertQueries autorater's prompt: the variants' prompt files, the placeholders each
must hold, the ``Today is YYYY-MM-DD.`` date, and the prompt filled for one trajectory.

A prompt file that lacks a placeholder its variant needs is refused (the autorater would rate
nothing); one without ``{reference}``, or with placeholders evalnb does not fill, is warned
about and sent as written.
"""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Any

from evalnb.benchmarks.geoexpertqueries.queries import ExpertQuery
from evalnb.records import prompts

PROMPT_DIR = Path(__file__).resolve().parent / "prompts"   # our default prompt files
PROMPT_FILES = {"tool_agnostic": "geoexpertqueries_tool_agnostic.txt",
                "workflow": "geoexpertqueries_workflow.txt"}
# What each variant's prompt file must hold, and what else evalnb fills in.
REQUIRED_PLACEHOLDERS = {"tool_agnostic": ("query", "trajectory"),
                         "workflow": ("query", "trajectory", "tools")}
FILLED_PLACEHOLDERS = ("query", "reference", "trajectory", "tools")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def placeholders(text: str) -> set[str]:
    """The ``{name}`` placeholders in a prompt file (JSON braces in it are not names)."""
    return set(re.findall(r"\{(\w+)\}", text))


def missing_placeholders(variant: str, text: str) -> list[str]:
    """The placeholders the variant needs that the prompt file lacks."""
    found = placeholders(text)
    return [name for name in REQUIRED_PLACEHOLDERS[variant] if name not in found]


def placeholder_warnings(file: prompts.PromptFile) -> list[str]:
    """What the prompt file leaves out, or holds that evalnb does not fill."""
    found = placeholders(file.text)
    warnings = []
    if "reference" not in found:
        warnings.append(f"prompt_file {file.path} has no {{reference}}: the queries' reference material "
                        "is not sent to the autorater")
    unknown = sorted(found - set(FILLED_PLACEHOLDERS))
    if unknown:
        warnings.append(f"prompt_file {file.path}: {', '.join('{' + u + '}' for u in unknown)} "
                        f"{'is' if len(unknown) == 1 else 'are'} not filled by evalnb and will be sent as written")
    return warnings


def check_rating_date(value: Any) -> bool:
    """Exactly YYYY-MM-DD and a real date (a YAML date was made one by config)."""
    # fullmatch first: date.fromisoformat also takes 20260314 and 2026-W11-6.
    try:
        return isinstance(value, str) and bool(_DATE.fullmatch(value)) and bool(date.fromisoformat(value))
    except ValueError:
        return False


def rating_prompt(template: str, task: ExpertQuery, trajectory: str, tools: str) -> str:
    # One pass over all four: a tool description or a query holding "{trajectory}" is sent as written.
    return prompts.fill(template, {"query": task.query, "reference": task.reference,
                                   "trajectory": trajectory, "tools": tools})
