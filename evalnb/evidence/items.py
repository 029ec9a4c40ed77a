"""Item evidence: what a reviewer needs to judge each item, shown three ways from one record.

At the end of the aggregate stage every benchmark declares each item's evidence
(:class:`~evalnb.core.types.ItemEvidence`: facts, passages and tables taken field by field from
the run's records). It is written, with every string passed through
:func:`evalnb.core.redaction.redact`, to ``evidence.json`` in the run directory, and rendered

1. in the report notebook (:func:`tasks_view`): a compact table of every item and the
   evidence of the lowest-scoring and most-disagreed items, as plain HTML (no JavaScript),
   long texts shortened with a visible marker;
2. as ``tasks.html`` (:mod:`evalnb.evidence.tasks_page`): one self-contained page with every item's
   full evidence;
3. in the terminal (:func:`evidence_text`, ``evalnb show RUN_DIR ITEM_ID``).

Nothing outside the run directory is needed to read any of them.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.core.errors import ConfigError
from evalnb.views.estimates import number_text
from evalnb.core.redaction import redact
from evalnb.core.types import Fact, ItemEvidence, Passage, Table
from evalnb.views.words import count_of, nouns_of, plural

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


def _parts(text: str, limit: int) -> tuple[str, str | None, str]:
    if len(text) <= limit:
        return text, None, ""
    head, tail = text[: limit * 2 // 3], text[-(limit // 3):]
    marker = (f"[... {len(text) - len(head) - len(tail):,} characters not shown here: "
              "see tasks.html or `evalnb show` ...]")
    return head, marker, tail


def shorten(text: str, limit: int) -> str:
    """``text`` whole, or its head and tail around a visible marker saying how much is cut."""
    head, marker, tail = _parts(text, limit)
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


@dataclass
class ItemView:
    """One item's whole evidence: text in a terminal (``evalnb show``), HTML in a notebook."""

    meta: dict[str, Any]
    item: ItemEvidence
    calls: Sequence[str] = ()   # every stored line of its calls: status, attempts, error

    def __str__(self) -> str:
        return evidence_text(self.item, self.meta) + calls_text(self.calls)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        calls = f"<pre>{html.escape(calls_text(self.calls))}</pre>" if self.calls else ""
        return redact(f'{_STYLE}<div class="evalnb-tasks">{evidence_html(self.item, self.meta, limit=10**12)}'
                      f'{calls}</div>')


def calls_text(calls: Sequence[str]) -> str:
    return "\n== calls (every stored line, oldest first) ==\n" + "\n".join(calls) + "\n" if calls else ""


def show(run_dir: Path, item_id: str) -> ItemView:
    """The evidence of one item of a run, then every stored line of its calls
    (``evalnb show RUN_DIR ITEM_ID`` prints it)."""
    from evalnb.evidence.failures import item_calls

    meta, item = find_item(Path(run_dir), item_id)
    return ItemView(meta, item, item_calls(Path(run_dir), item_id))


# --- the report notebook: HTML without JavaScript ------------------------------------------------

_STYLE = """<style>
.evalnb-tasks table{border-collapse:collapse;font-size:12px;margin:4px 0 10px}
div.evalnb-tasks.evalnb-tasks table th,div.evalnb-tasks.evalnb-tasks table td{border:1px solid #ccc;padding:2px 6px;text-align:left;vertical-align:top}\ndiv.evalnb-tasks.evalnb-tasks table td.num{text-align:right}
.evalnb-tasks pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;border:1px solid #ddd;
padding:6px;max-height:none;font-size:12px}
.evalnb-tasks .evidence{border-left:3px solid #4c72b0;padding-left:10px;margin:10px 0 18px}
.evalnb-tasks .marker{color:#a00}
</style>"""


def _cell(value: Any, fraction: bool) -> str:
    """A table cell: text left, numbers right; a score (``fraction``) always with its decimals,
    so 1 reads 1.000 beside 0.500, never as a count."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        text = number_text(value) if fraction else number(value)
        return f'<td class="num">{html.escape(text)}</td>'
    return f"<td>{html.escape(number(value))}</td>"


def _html_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "",
                fractions: Sequence[str] = ()) -> str:
    """The evidence's own tables (self-contained HTML: also in tasks.html, with no stylesheet
    but ours); the JupyterLab stylesheet a rendered page carries is outranked by the doubled
    class in _STYLE."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(v, c in fractions) for c, v in zip(columns, row)) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def evidence_html(item: ItemEvidence, meta: Mapping[str, Any] | None = None, limit: int = NOTEBOOK_CHARS) -> str:
    """One item's evidence as static HTML; passages longer than ``limit`` shortened visibly."""
    noun = (meta or {}).get("noun", "item")
    parts = [f'<div class="evidence" id="evidence-{html.escape(item.item_id)}">'
             f"<h4>{html.escape(noun)} {html.escape(item.item_id)}: status {html.escape(item.status)}, "
             f"score {html.escape(number(item.score, 4))}"
             + (f", disagreement {html.escape(number(item.disagreement))}" if item.disagreement is not None else "")
             + "</h4>"]
    for section in item.sections:
        if isinstance(section, Fact):
            parts.append(f"<p><b>{html.escape(section.label)}</b>: {html.escape(section.value)}</p>")
        elif isinstance(section, Passage) and section.text is None:   # nothing came back: no length
            parts.append(f"<p><b>{html.escape(section.label)}</b>: (none)</p>")
        elif isinstance(section, Passage):
            text = section.text or ""
            head, marker, tail = _parts(text, limit)
            shown = html.escape(head) + ("" if marker is None else
                                         f'\n<span class="marker">{html.escape(marker)}</span>\n{html.escape(tail)}')
            title = f"<b>{html.escape(section.label)}</b> ({len(text):,} characters)"
            # Folded passages (reasoning, a long trajectory) open on a click: <details> needs no script.
            parts.append(f"<details><summary>{title}</summary><pre>{shown}</pre></details>" if section.collapsed
                         else f"<p>{title}</p><pre>{shown}</pre>")
        else:
            parts.append(f"<p><b>{html.escape(section.label)}</b></p>" + _html_table(section.columns, section.rows))
    parts.append("</div>")
    return "".join(parts)


def compact_rows(items: Sequence[ItemEvidence]) -> tuple[list[str], list[list[Any]]]:
    """id, status, score, each judge's score, disagreement: one row per item."""
    judges = list(dict.fromkeys(j for item in items for j in item.judges))
    columns = ["id", "status", "score", *judges, "disagreement"]
    rows = [[item.item_id, item.status, item.score, *(item.judges.get(j) for j in judges), item.disagreement]
            for item in items]
    return columns, rows


@dataclass
class TasksView:
    """The report notebook's Tasks section: shows as HTML in the cell output."""

    meta: dict[str, Any]
    items: list[ItemEvidence]

    def _repr_html_(self) -> str:
        noun, nouns = (html.escape(w) for w in nouns_of(self.meta))
        columns, rows = compact_rows(self.items)
        low = lowest_scoring(self.items)
        spread = most_disagreed(self.items, shown=low)
        parts = [_STYLE, '<div class="evalnb-tasks">',
                 f"<p>{count_of(len(self.items), noun, nouns)}. Every {noun}'s full evidence: "
                 "<code>tasks.html</code> in the run directory, or <code>evalnb show RUN_DIR ID</code>.</p>",
                 _html_table(columns, rows, "compact", fractions=columns[2:]),   # the scores
                 f"<h3>The {'lowest-scoring ' + noun if len(low) == 1 else f'{len(low)} lowest-scoring {nouns}'}</h3>",
                 *(evidence_html(i, self.meta) for i in low)]
        if spread:
            title = f"most-disagreed {noun}" if len(spread) == 1 else f"{len(spread)} most-disagreed {nouns}"
            parts.append(f"<h3>The {title} (not shown above)</h3>")
            parts += [evidence_html(i, self.meta) for i in spread]
        elif any(i.disagreement for i in self.items):
            parts.append(f"<p>Every {noun} whose judges (or runs) disagree is shown above.</p>")
        elif any(i.disagreement is not None for i in self.items):
            parts.append(f"<p>No {noun}'s judges (or runs) disagree.</p>")
        else:
            parts.append(f"<p>No {noun} has scores from two judges (or runs) to disagree.</p>")
        parts.append("</div>")
        return redact("".join(parts))

    def __repr__(self) -> str:
        """The cell's text/plain, saved beside the HTML in the record: a pointer, not a second
        copy of every item (the dataclass repr ran to most of a megabyte on 481 tasks)."""
        noun, nouns = nouns_of(self.meta)
        lowest = lowest_scoring(self.items)
        low = ", ".join(i.item_id for i in lowest)
        spread = ", ".join(i.item_id for i in most_disagreed(self.items, shown=lowest)) or "none besides those"
        return (f"{count_of(len(self.items), noun, nouns)} (HTML above; tasks.html or `evalnb show RUN_DIR ID` "
                f"for any {noun}). Lowest-scoring: {low}. Most disagreed: {spread}.")


def tasks_view(run_dir: Path) -> TasksView:
    meta, items = load_evidence(run_dir)
    return TasksView(meta, items)


@dataclass
class TitledTables:
    """Tables a benchmark declares, each under its title: shows as HTML in a notebook."""

    tables: list[tuple[str, Any]]   # (title, pandas DataFrame)
    empty: str = "None declared."

    def _repr_html_(self) -> str:
        from evalnb.views.tables import table_html   # pandas: not for `evalnb show`

        if not self.tables:
            return f'<p class="evalnb-empty">{html.escape(self.empty)}</p>'
        parts = []
        for title, table in self.tables:
            parts.append(f"<h4>{html.escape(title)}</h4>")
            parts.append(table_html(table) if len(table) else "<p>(no rows)</p>")
        return redact("".join(parts))

    def __repr__(self) -> str:
        from evalnb.views.tables import table_text   # pandas: not for `evalnb show`

        return "\n\n".join(f"{title}\n{table_text(table) if len(table) else '(no rows)'}"
                           for title, table in self.tables) or self.empty
