"""Item evidence: what a reviewer needs to judge each item, shown three ways from one record.

At the end of the aggregate stage every benchmark declares each item's evidence
(:class:`~evalnb.core.types.ItemEvidence`: facts, passages and tables taken field by field from
the run's records). It is written, with every string passed through
:func:`evalnb.core.redaction.redact`, to ``evidence.json`` in the run directory, and rendered

1. in the report notebook (:func:`evalnb.evidence.items_html.tasks_view`): a compact table of
   every item and the evidence of the lowest-scoring and most-disagreed items, as plain HTML
   (no JavaScript), long texts shortened with a visible marker;
2. as ``tasks.html`` (:mod:`evalnb.evidence.tasks_page`): one self-contained page with every item's
   full evidence;
3. in the terminal (:func:`evidence_text`, ``evalnb show RUN_DIR ITEM_ID``; one item in a
   notebook: :func:`evalnb.evidence.items_html.show`).

Nothing outside the run directory is needed to read any of them. This module holds the
record (writing and reading ``evidence.json``), the plain values every rendering shares
(numbers, shortening, which items to show) and the terminal's text; the notebook's HTML is in
:mod:`evalnb.evidence.items_html`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalnb.core.errors import ConfigError
from evalnb.core.redaction import redact
from evalnb.core.types import Fact, ItemEvidence, Passage, Table
from evalnb.views.words import plural

EVIDENCE_FILE = "evidence.json"
TASKS_PAGE = "tasks.html"
NOTEBOOK_CHARS = 1500   # a passage longer than this is shortened in the notebook (head and tail kept)
SHOWN = 5               # lowest-scoring and most-disagreed items whose evidence the notebook shows


def _clean(value: Any) -> Any:
    """Every string in ``value`` passed through the secret filter."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def evidence_document(meta: Mapping[str, Any], items: Sequence[ItemEvidence]) -> dict[str, Any]:
    """The body of evidence.json: the run's facts and every item's evidence, redacted."""
    return _clean({"meta": dict(meta), "items": [item.as_dict() for item in items]})


def write_evidence(run_dir: Path, meta: Mapping[str, Any], items: Sequence[ItemEvidence]) -> dict[str, Any]:
    """evidence.json and tasks.html in ``run_dir``; returns the document written."""
    from evalnb.records.stores import write_json
    from evalnb.evidence.tasks_page import write_tasks_page

    document = evidence_document(meta, items)
    write_json(run_dir / EVIDENCE_FILE, document, indent=None)   # read by tasks.html and `evalnb show`
    write_tasks_page(run_dir / TASKS_PAGE, document)
    return document


def run_meta(scores: Mapping[str, Any], metrics: Sequence[Mapping[str, Any]], statuses: Sequence[str],
             noun: str, nouns: str | None = None, model_label: str | None = None) -> dict[str, Any]:
    """What the views say about the run above its items (``nouns``: the noun's plural;
    ``model_label``: the contestant as the views name it)."""
    model = (scores.get("config") or {}).get("model") or {}
    return {"benchmark": scores.get("benchmark"), "run_name": scores.get("run_name"),
            "model": model_label or f"{model.get('provider', '?')}:{model.get('name', '?')}",
            "label": scores.get("label"), "complete": scores.get("complete"), "statuses": list(statuses),
            "noun": noun, "nouns": nouns or plural(noun), "metrics": list(metrics)}


def load_evidence(run_dir: Path) -> tuple[dict[str, Any], list[ItemEvidence]]:
    path = Path(run_dir) / EVIDENCE_FILE
    if not path.exists():
        raise ConfigError(f"{path}: no evidence yet; run the aggregate stage first")
    document = json.loads(path.read_text("utf-8"))
    return document["meta"], [ItemEvidence.from_dict(item) for item in document["items"]]


# --- plain values ----------------------------------------------------------------------------------

def number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else f"{value:.{digits}f}"
    return str(value)


def shortened_parts(text: str, limit: int) -> tuple[str, str | None, str]:
    if len(text) <= limit:
        return text, None, ""
    head, tail = text[: limit * 2 // 3], text[-(limit // 3):]
    marker = (f"[... {len(text) - len(head) - len(tail):,} characters not shown here: "
              "see tasks.html or `evalnb show` ...]")
    return head, marker, tail


def shorten(text: str, limit: int) -> str:
    """``text`` whole, or its head and tail around a visible marker saying how much is cut."""
    head, marker, tail = shortened_parts(text, limit)
    return head if marker is None else f"{head}\n{marker}\n{tail}"


def judges_line(item: ItemEvidence) -> str:
    return ", ".join(f"{judge} {number(score)}" for judge, score in item.judges.items()) or "-"


def lowest_scoring(items: Sequence[ItemEvidence], n: int = SHOWN) -> list[ItemEvidence]:
    scored = [i for i in items if i.score is not None]
    return sorted(scored, key=lambda i: (i.score, i.item_id))[:n]


def most_disagreed(items: Sequence[ItemEvidence], n: int = SHOWN,
                   shown: Sequence[ItemEvidence] = ()) -> list[ItemEvidence]:
    """The items whose judges disagree most: only those that disagree at all, and none of
    ``shown`` (the lowest-scoring list above it: one item's evidence once)."""
    seen = {i.item_id for i in shown}
    spread = [i for i in items if i.disagreement and i.item_id not in seen]
    return sorted(spread, key=lambda i: (-(i.disagreement or 0.0), i.item_id))[:n]


# --- terminal -----------------------------------------------------------------------------------------

def evidence_text(item: ItemEvidence, meta: Mapping[str, Any] | None = None) -> str:
    """One item's evidence as plain text, whole."""
    lines = [f"{(meta or {}).get('noun', 'item')} {item.item_id}   status {item.status}   score {number(item.score, 4)}"]
    if item.judges:
        lines.append(f"judges: {judges_line(item)}   disagreement {number(item.disagreement)}")
    for section in item.sections:
        if isinstance(section, Fact):
            lines.append(f"{section.label}: {section.value}")
        elif isinstance(section, Passage):
            if section.text is None:   # nothing came back: no length to give
                lines += ["", f"== {section.label}: (none) =="]
            else:
                lines += ["", f"== {section.label} ({len(section.text):,} characters) ==", section.text]
        else:
            lines += ["", f"== {section.label} ==", _text_table(section)]
    return redact("\n".join(lines)) + "\n"


def _text_table(table: Table) -> str:
    cells = [list(table.columns)] + [[number(v) for v in row] for row in table.rows]
    widths = [min(60, max(len(str(r[i])) for r in cells)) for i in range(len(table.columns))]
    out = []
    for n, row in enumerate(cells):
        out.append("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def find_item(run_dir: Path, item_id: str) -> tuple[dict[str, Any], ItemEvidence]:
    meta, items = load_evidence(run_dir)
    for item in items:
        if item.item_id == item_id:
            return meta, item
    import difflib
    close = difflib.get_close_matches(item_id, [i.item_id for i in items], n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; the run has {len(items)} items"
    raise ConfigError(f"{run_dir}: no item {item_id!r}{hint}")


def calls_text(calls: Sequence[str]) -> str:
    return "\n== calls (every stored line, oldest first) ==\n" + "\n".join(calls) + "\n" if calls else ""
