"""Item evidence in the report notebook: a compact table of every item and the evidence of the
lowest-scoring and most-disagreed items, as static HTML (no JavaScript), long passages
shortened with a visible marker; one item's whole evidence (:func:`show`: text in a terminal,
HTML in a notebook); and a holder of several titled tables for one cell.

The record, the plain values and the terminal's text are in :mod:`evalnb.evidence.items`;
this module only draws them as HTML, so the notebook and ``tasks.html`` read one record.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.core.redaction import redact
from evalnb.core.types import Fact, ItemEvidence, Passage
from evalnb.evidence.items import (NOTEBOOK_CHARS, calls_text, evidence_text, find_item, load_evidence,
                                   lowest_scoring, most_disagreed, number, shortened_parts)
from evalnb.views.estimates import number_text
from evalnb.views.words import count_of, nouns_of

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
            head, marker, tail = shortened_parts(text, limit)
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


def show(run_dir: Path, item_id: str) -> ItemView:
    """The evidence of one item of a run, then every stored line of its calls
    (``evalnb show RUN_DIR ITEM_ID`` prints it)."""
    from evalnb.evidence.failures import item_calls

    meta, item = find_item(Path(run_dir), item_id)
    return ItemView(meta, item, item_calls(Path(run_dir), item_id))
