"""``evalnb estimate``'s table: one row per stage and model in 100 columns (``--wide``: every
column the estimate has). A cost reads ``free`` for an offline baseline or a local command
without a price, ``no price`` for a priced API the parameters give none, else US dollars."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evalnb.app.results import table_text
from evalnb.views.labels import header as label

WIDTH = 100
MODEL_MIN = 12   # characters of a model's name kept when the table must shrink to fit


def compact(n: Any) -> str:
    """``812``, ``12.3k``, ``4.56M``: a count short enough for a narrow column."""
    if n is None:
        return "-"
    n = float(n)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(n) >= limit:
            value = n / (limit if suffix != "k" else 1e3)
            return f"{value:.3g}{suffix}"
    return f"{n:,.0f}"


def cost_text(row: Mapping[str, Any], key: str = "max_total_cost_usd") -> str:
    if row.get("free"):
        return "free"
    value = row.get(key)
    return "no price" if value is None else f"${value:,.2f}"


NARROW = ("stage", "model", "mode", "calls", "already_done", "to_make", "est_input_tokens", "max_output_tokens",
          "max_total_cost_usd")   # headers: the vocabulary's (evalnb.views.labels)


def estimate_table(rows: Sequence[Mapping[str, Any]], wide: bool = False) -> str:
    if wide:
        keys = list(dict.fromkeys(k for r in rows for k in r if k != "free"))
        body = [[_wide_cell(r, k) for k in keys] for r in rows]
        return table_text([label(k) for k in keys], body, indent="")
    body = [[_cell(r, k) for k in NARROW] for r in rows]
    header = [label(k) for k in NARROW]
    text = table_text(header, body, indent="")
    width = max(len(line) for line in text.splitlines())
    if width > WIDTH:   # the model's name gives way first
        keep = max(MODEL_MIN, max(len(r[1]) for r in body) - (width - WIDTH))
        for r in body:
            r[1] = r[1] if len(r[1]) <= keep else r[1][: keep - 1] + "…"
        text = table_text(header, body, indent="")
    return text


def _cell(row: Mapping[str, Any], key: str) -> str:
    if key.endswith("_usd"):
        return cost_text(row, key)
    if key in ("est_input_tokens", "max_output_tokens"):
        return compact(row.get(key))
    value = row.get(key)
    return "-" if value is None else str(value)


def _wide_cell(row: Mapping[str, Any], key: str) -> str:
    if key.endswith("_usd"):
        return cost_text(row, key)
    value = row.get(key)
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
