"""``tasks.html``: every item of a run on one self-contained page.

Inline CSS and JavaScript, the evidence embedded as JSON; no remote resource (a Content
Security Policy forbids any), no server: it opens from disk. Filter by status, search the
text of every item, sort by score or disagreement, and expand an item to its full
evidence. Expanded evidence is built only when first opened, and all text is inserted as
text (never as markup), so a model's answer cannot inject anything into the page. The
strings were redacted when the evidence was written, and the page is passed through the
secret filter again as a whole.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evalnb.core.redaction import redact
from evalnb.views.words import count_of, nouns_of

_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px;color:#222}
h1{font-size:20px;margin:0 0 4px}
.meta{color:#555;margin:0 0 8px}.label{color:#a00;font-weight:600}
.controls{position:sticky;top:0;background:#fff;padding:8px 0;border-bottom:1px solid #ddd;display:flex;
gap:16px;flex-wrap:wrap;align-items:center;z-index:1}
table.items{border-collapse:collapse;width:100%;margin-top:8px}
table.items>thead th{text-align:left;border-bottom:2px solid #888;padding:4px 6px}
tr.item>td{border-bottom:1px solid #eee;padding:4px 6px;cursor:pointer;vertical-align:top}
tr.item:hover>td{background:#f3f6fb}
tr.item.open>td{background:#e8eef8}
td.num{font-variant-numeric:tabular-nums}
.toggle{width:1.5em;color:#4c72b0}
tr.detail>td{padding:8px 12px 16px 28px;border-bottom:2px solid #4c72b0}
.fact{margin:2px 0}.fact b,.passage summary b,.table-label{font-weight:600}
.passage{margin:6px 0}
.passage pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;border:1px solid #ddd;padding:6px;
margin:4px 0;max-height:40em;overflow:auto}
table.evidence-table{border-collapse:collapse;margin:4px 0 8px;font-size:13px}
table.evidence-table th,table.evidence-table td{border:1px solid #ccc;padding:2px 6px;text-align:left;
vertical-align:top}
.status{font-family:ui-monospace,monospace;font-size:12px}
"""

_JS = r"""
(function () {
  "use strict";
  var doc = JSON.parse(document.getElementById("evidence-data").textContent);
  var items = doc.items;
  var tbody = document.getElementById("rows");
  var statusBox = document.getElementById("status");
  var searchBox = document.getElementById("search");
  var sortBox = document.getElementById("sort");
  var countBox = document.getElementById("count");

  function fmt(v, digits) {
    if (v === null || v === undefined) { return "-"; }
    if (typeof v === "number") { return Number.isInteger(v) ? String(v) : v.toFixed(digits || 3); }
    if (typeof v === "boolean") { return v ? "true" : "false"; }
    return String(v);
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) { node.className = cls; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  var statuses = [];
  doc.meta.statuses.forEach(function (s) { statuses.push(s); });
  items.forEach(function (it) { if (statuses.indexOf(it.status) < 0) { statuses.push(it.status); } });
  statuses.forEach(function (s) {
    var n = items.filter(function (it) { return it.status === s; }).length;
    if (n) { var o = el("option", "", s + " (" + n + ")"); o.value = s; statusBox.appendChild(o); }
  });

  function renderEvidence(it) {
    var box = el("div", "evidence");
    it.sections.forEach(function (sec) {
      if (sec.kind === "fact") {
        var p = el("div", "fact"); p.appendChild(el("b", "", sec.label + ": ")); p.appendChild(document.createTextNode(sec.value));
        box.appendChild(p);
      } else if (sec.kind === "passage") {
        if (sec.text === null) {  // nothing came back: no length, no empty box
          var none = el("div", "fact"); none.appendChild(el("b", "", sec.label + ": ")); none.appendChild(document.createTextNode("(none)"));
          box.appendChild(none); return;
        }
        var d = el("details", "passage"); d.open = !sec.collapsed;
        var sum = el("summary"); sum.appendChild(el("b", "", sec.label));
        sum.appendChild(document.createTextNode(" (" + sec.text.length.toLocaleString("en") + " characters)"));
        d.appendChild(sum); d.appendChild(el("pre", "", sec.text)); box.appendChild(d);
      } else if (sec.kind === "table") {
        box.appendChild(el("div", "table-label", sec.label));
        var t = el("table", "evidence-table"), head = el("tr");
        sec.columns.forEach(function (c) { head.appendChild(el("th", "", c)); });
        var th = el("thead"); th.appendChild(head); t.appendChild(th);
        var tb = el("tbody");
        sec.rows.forEach(function (r) {
          var tr = el("tr"); r.forEach(function (v) { tr.appendChild(el("td", "", fmt(v))); }); tb.appendChild(tr);
        });
        t.appendChild(tb); box.appendChild(t);
      }
    });
    return box;
  }

  var judges = [];
  items.forEach(function (it) { Object.keys(it.judges).forEach(function (j) { if (judges.indexOf(j) < 0) { judges.push(j); } }); });
  var rows = items.map(function (it, index) {
    var tr = el("tr", "item");
    tr.dataset.id = it.item_id;
    tr.appendChild(el("td", "toggle", "\u25b8"));
    tr.appendChild(el("td", "id", it.item_id));
    tr.appendChild(el("td", "status", it.status));
    tr.appendChild(el("td", "num score", fmt(it.score, 4)));
    tr.appendChild(el("td", "judges", judges.filter(function (j) { return j in it.judges; }).map(function (j) {
      return j + " " + fmt(it.judges[j]); }).join(", ") || "-"));
    tr.appendChild(el("td", "num disagreement", fmt(it.disagreement)));
    var row = {item: it, tr: tr, detail: null, open: false, haystack: null, index: index};
    tr.addEventListener("click", function () { toggle(row); });
    return row;
  });

  function toggle(row) {
    row.open = !row.open;
    row.tr.classList.toggle("open", row.open);
    row.tr.firstChild.textContent = row.open ? "\u25be" : "\u25b8";
    if (row.open && !row.detail) {          // built on first opening only
      row.detail = el("tr", "detail");
      var td = el("td"); td.colSpan = 6; td.appendChild(renderEvidence(row.item));
      row.detail.appendChild(td);
    }
    if (row.open) { row.tr.parentNode.insertBefore(row.detail, row.tr.nextSibling); }
    else if (row.detail && row.detail.parentNode) { row.detail.parentNode.removeChild(row.detail); }
  }

  function haystack(row) {
    if (row.haystack === null) {
      var parts = [row.item.item_id, row.item.status];
      row.item.sections.forEach(function (s) {
        parts.push(s.label);
        if (s.kind === "fact") { parts.push(s.value); }
        else if (s.kind === "passage") { parts.push(s.text || ""); }
        else { s.rows.forEach(function (r) { parts.push(r.map(fmt).join(" ")); }); }
      });
      row.haystack = parts.join("\n").toLowerCase();
    }
    return row.haystack;
  }

  function key(row, field) {
    var v = row.item[field];
    return v === null || v === undefined ? null : v;
  }
  function compare(field, direction) {
    return function (a, b) {
      var x = key(a, field), y = key(b, field);
      if (x === null && y === null) { return a.index - b.index; }
      if (x === null) { return 1; }                 // items without a value last, either way
      if (y === null) { return -1; }
      return (x - y) * direction || a.index - b.index;
    };
  }

  function update() {
    var status = statusBox.value, words = searchBox.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    var order = rows.slice();
    var sort = sortBox.value;
    if (sort === "score-asc") { order.sort(compare("score", 1)); }
    else if (sort === "score-desc") { order.sort(compare("score", -1)); }
    else if (sort === "disagreement-desc") { order.sort(compare("disagreement", -1)); }
    var shown = 0, fragment = document.createDocumentFragment();
    order.forEach(function (row) {
      var visible = (!status || row.item.status === status) &&
        words.every(function (w) { return haystack(row).indexOf(w) >= 0; });
      row.tr.hidden = !visible;
      if (row.detail) { row.detail.hidden = !visible; }
      fragment.appendChild(row.tr);
      if (row.open && row.detail) { fragment.appendChild(row.detail); }
      if (visible) { shown += 1; }
    });
    tbody.appendChild(fragment);
    countBox.textContent = shown + " of " + rows.length + " shown";
  }

  var pending = null;
  statusBox.addEventListener("change", update);
  sortBox.addEventListener("change", update);
  searchBox.addEventListener("input", function () { clearTimeout(pending); pending = setTimeout(update, 150); });
  update();
  document.body.dataset.ready = "true";
})();
"""


def _metrics_line(meta: Mapping[str, Any]) -> str:
    parts = []
    for metric in meta.get("metrics") or []:
        if metric.get("value") is None:
            continue
        ci = ""
        if metric.get("ci_low") is not None:
            ci = f" [{metric['ci_low']:.3f}, {metric['ci_high']:.3f}]"
        value = metric["value"]
        shown = f"{value:g}" if float(value).is_integer() else f"{value:.4f}"   # a count stays a count
        parts.append(f"{metric['label']}: {shown}{ci}")
    return " · ".join(parts)


def tasks_page(document: Mapping[str, Any]) -> str:
    """The whole page for an evidence document (see :mod:`evalnb.evidence.items`)."""
    meta = document["meta"]
    data = json.dumps(document, ensure_ascii=False).replace("<", "\\u003c")   # no "</script>" in the data
    noun, nouns = nouns_of(meta)
    title = f"{meta.get('run_name', 'run')}: {count_of(len(document['items']), noun, nouns)}"
    label = f'<p class="meta label">{html.escape(meta["label"])}</p>' if meta.get("label") else ""
    incomplete = '' if meta.get("complete", True) else \
        '<p class="meta label">The run is incomplete: resumable work remains.</p>'
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{html.escape(title)}</h1>
<p class="meta">benchmark {html.escape(str(meta.get('benchmark')))} · model {html.escape(str(meta.get('model')))}</p>
<p class="meta">{html.escape(_metrics_line(meta))}</p>
{label}{incomplete}
<div class="controls">
<label>Status <select id="status"><option value="">all</option></select></label>
<label>Search <input id="search" type="search" placeholder="words in any field" size="30"></label>
<label>Sort <select id="sort">
<option value="">data file order</option>
<option value="score-asc">score, lowest first</option>
<option value="score-desc">score, highest first</option>
<option value="disagreement-desc">disagreement, largest first</option>
</select></label>
<span id="count"></span>
</div>
<table class="items">
<thead><tr><th></th><th>id</th><th>status</th><th>score</th><th>judges</th><th>disagreement</th></tr></thead>
<tbody id="rows"></tbody>
</table>
<script type="application/json" id="evidence-data">{data}</script>
<script>{_JS}</script>
</body>
</html>
"""
    return redact(page)


def write_tasks_page(path: Path, document: Mapping[str, Any]) -> Path:
    from evalnb.records.stores import write_text

    write_text(path, tasks_page(document))
    return path
