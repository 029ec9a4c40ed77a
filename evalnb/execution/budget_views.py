"""What the spending ceiling shows: scores.json's ``budget``, the manifest, the report, the one
line a stopped command ends with, and ``evalnb status`` (read from the ledgers and records).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalnb.config import RunConfig
from evalnb.execution.ceilings import LEDGER_NAME, ceilings_of, command_token, totals
from evalnb.execution.spend import run_spend


def budget_summary(config: RunConfig) -> dict[str, Any] | None:
    """Spend against each ceiling, for scores.json, the manifest, the report and `evalnb status`."""
    ceilings = ceilings_of(config)
    if not ceilings:
        return None
    spent_here = run_spend(config.output_dir, config.to_dict())
    rows = []
    for ceiling in ceilings:
        data = ceiling.store.read()
        mine = data.get("runs", {}).get(str(config.output_dir), {})
        if ceiling.scope.startswith("run"):
            spent, doubt, reserved = spent_here, mine.get("in_doubt_usd", 0.0), 0.0
        else:
            spent, doubt, reserved = totals(data)
        stopped = (data.get("stopped") or {}).get(str(config.output_dir))
        rows.append({"scope": ceiling.scope, "max_cost_usd": ceiling.max_usd, "spent_usd": round(spent, 6),
                     "in_doubt_usd": round(doubt, 6), "reserved_usd": round(reserved, 6),
                     "this_run_spent_usd": round(spent_here, 6), "left_usd": round(ceiling.max_usd - spent - doubt, 6),
                     "stopped": stopped["line"] if stopped and stopped.get("command") == command_token() else None})
    return {"ceilings": rows, "note": "spent: every attempt's reported usage at the configured prices; in doubt: "
                                      "calls in flight when their process died, at their upper bound"}


def refusal_line(run_dir: Path, token: str) -> str | None:
    """The refusal that stopped this command's run (read from the ledgers), or None."""
    config = _read_json(run_dir / "config.json") or {}
    paths = [run_dir / LEDGER_NAME]
    suite = (config.get("budget") or {}).get("suite")
    if suite:
        paths.append(Path(suite["ledger"]))
    for path in paths:
        data = _read_json(path) or {}
        stopped = (data.get("stopped") or {}).get(str(run_dir))
        if stopped and stopped.get("command") == token:
            return str(stopped["line"])
    return None


def refusals_since(path: Path, since: str) -> list[str]:
    """The ceiling's refusals recorded at or after ``since`` (an ISO time), read only."""
    stopped = (_read_json(path) or {}).get("stopped") or {}
    return [entry["line"] for entry in stopped.values() if entry.get("at", "") >= since]


def ledger_totals(path: Path) -> dict[str, float]:
    """A ceiling's ledger as it stands (read only): spent, in doubt and reserved over its runs."""
    spent, doubt, reserved = totals(_read_json(path) or {})
    return {"spent_usd": spent, "in_doubt_usd": doubt, "reserved_usd": reserved}


def status_lines(run_dir: Path) -> list[str]:
    """`evalnb status RUN_DIR`: spend against each of the run's ceilings, read from disk only."""
    config = _read_json(run_dir / "config.json") or {}
    budget = config.get("budget") or {}
    ledgers = ([("run", budget["max_cost_usd"], run_dir / LEDGER_NAME)] if "max_cost_usd" in budget else []) + \
        ([(f"suite {budget['suite']['name']}", budget["suite"]["max_cost_usd"], Path(budget["suite"]["ledger"]))]
         if "suite" in budget else [])
    lines = []
    for scope, ceiling, path in ledgers:
        data = _read_json(path) or {}
        mine = data.get("runs", {}).get(str(run_dir), {})
        spent, doubt, reserved = (run_spend(run_dir, config), mine.get("in_doubt_usd", 0.0), 0.0) \
            if scope == "run" else totals(data)
        stopped = (data.get("stopped") or {}).get(str(run_dir))
        lines.append(f"budget ({scope}): ${spent:.4f} spent of ${ceiling:.4f}"
                     + (f", ${doubt:.4f} in doubt" if doubt else "") + (f", ${reserved:.4f} reserved" if reserved else "")
                     + (f"; last stopped {stopped['at']}: {stopped['line']}" if stopped else ""))
    return lines


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None

