"""The ledger of each spending ceiling: ``spend.json`` in the run directory (or, for a suite,
in the suite directory), changed only under its file lock, so that the processes of a suite
share one account.

It keeps each run's spending, the reservations of calls in flight (by process), and the
reservations of processes that died in flight, which become spending in doubt for good: the
call may have been billed, and nothing says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.config import RunConfig
from evalnb.execution.batch.journal import IN_FLIGHT, read_only
from evalnb.execution.spend import run_spend
from evalnb.providers.ledger import LockedJson, locked_json
from evalnb.records.lock import TOKEN_ENV

LEDGER_NAME = "spend.json"


def this_process() -> str:
    """This process, told apart from a later one with the same pid (Linux: its start time)."""
    return f"{os.getpid()}:{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.rindex(")") + 2:].split()[19]


def _alive(process: str) -> bool:
    pid_text, _, start = process.partition(":")
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not start or _start_time(pid) in ("", start)


def settle_the_dead(data: dict[str, Any]) -> None:
    """Reservations of processes that died in flight become spending in doubt, for good."""
    held = data.setdefault("held", {})
    for key, hold in list(held.items()):
        if not _alive(hold["process"]):
            run = data.setdefault("runs", {}).setdefault(hold["run"], {})
            run["in_doubt_usd"] = run.get("in_doubt_usd", 0.0) + hold["usd"]
            del held[key]


def totals(data: Mapping[str, Any]) -> tuple[float, float, float]:
    """(spent, in doubt, reserved) over every run of the ledger; reserved: calls in flight and
    batches in flight (submitted, not yet collected)."""
    runs = data.get("runs", {}).values()
    return (sum(r.get("spent_usd", 0.0) for r in runs), sum(r.get("in_doubt_usd", 0.0) for r in runs),
            sum(h["usd"] for h in data.get("held", {}).values()) + sum(r.get("batch_usd", 0.0) for r in runs))


def batches_reserved(run_dir: Path) -> float:
    """What the run's batches in flight were reserved at when submitted (their journal says)."""
    return sum(float(e.get("reserved_usd") or 0.0) for e in read_only(run_dir) if e["state"] in IN_FLIGHT)


@dataclass(frozen=True)
class Ceiling:
    max_usd: float
    store: LockedJson
    scope: str     # "run NAME" or "suite NAME", for messages
    advice: str    # how to continue


def ceilings_of(config: RunConfig) -> list[Ceiling]:
    budget = config.budget or {}
    out = []
    if "max_cost_usd" in budget:
        out.append(Ceiling(budget["max_cost_usd"], locked_json(config.output_dir / LEDGER_NAME),
                           f"run {config.run_name}", f"raise budget.max_cost_usd in {config.source}"))
    if "suite" in budget:
        suite = budget["suite"]
        out.append(Ceiling(suite["max_cost_usd"], locked_json(Path(suite["ledger"])), f"suite {suite['name']}",
                           "raise budget.max_cost_usd in the suite file"))
    return out


def command_token() -> str:
    """Names the command a refusal belongs to: `evalnb run`'s lock token, else this process."""
    return os.environ.get(TOKEN_ENV) or f"process {this_process()}"


def open_shared_ledger(path: Path, max_usd: float, run_dirs: list[Path]) -> None:
    """A suite's ledger before its runs start: what each of its runs has spent, from the records."""
    with locked_json(path).transaction() as data:
        settle_the_dead(data)
        runs = data.setdefault("runs", {})
        for run_dir in run_dirs:
            runs.setdefault(str(run_dir), {})["spent_usd"] = run_spend(run_dir) if (run_dir / "config.json").exists() \
                else 0.0
        data["max_cost_usd"] = max_usd
