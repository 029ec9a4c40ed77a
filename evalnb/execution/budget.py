"""The spending ceiling (spec README reading 27): no call is sent that could pass it.

``budget: {max_cost_usd: N}`` in a run's parameters bounds that run; ``evalnb suite`` adds
``budget.suite`` to each contestant, a ceiling over all the suite's runs together. Each
ceiling keeps a ledger (``spend.json`` in the run directory, or in the suite directory),
changed only under its file lock (:class:`evalnb.providers.ledger.LockedJson`), so that the
processes of a suite share one account.

What counts against a ceiling, in US dollars at the configured ``prices``:

- spent: every stored record's reported usage (at the batch price for a call answered inside a
  provider batch) and its failed attempts' ``failed_attempt_usage`` (:func:`evalnb.providers.retry.failed_attempt_usage`),
  over every line of the stage stores, so retries and earlier invocations are all counted. It
  is read from the records whenever a stage starts: a resume, a kill or a second process
  cannot forget it.
- in doubt: the reservations of calls that were in flight when their process died (it may have
  been billed; nothing says otherwise), kept in the ledger for good.
- reserved: each call in flight, at its upper bound (estimated input tokens and the whole output
  budget) from just before it is sent until its reply (or failure) says what it cost.

A call is sent only when spent + in doubt + reserved + its own upper bound stays within every
ceiling; otherwise it is not sent (it stays resumable work), the stage takes no new call, and
the command ends with exit 2 and the one line of :meth:`Budget.refusal`. Calls that cost
nothing (an unpriced offline or command endpoint) are never refused. The ceiling is not part
of the fingerprint: raise it and run the same command to continue.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalnb.config import RunConfig
from evalnb.core.lock import TOKEN_ENV
from evalnb.core.manifest import utc_now
from evalnb.core.records import read_lines
from evalnb.execution.batch import batch_price
from evalnb.execution.batch.journal import IN_FLIGHT, read_only
from evalnb.providers.base import ChatRequest, Completion, Provider
from evalnb.providers.ledger import LockedJson, locked_json
from evalnb.providers.retry import (NotSent, as_provider_error, failed_attempt_usage, request_input_tokens,
                                    usage_or_estimate)

LEDGER_NAME = "spend.json"
STORES = ("generate.jsonl", "judge.jsonl", "judge_retest.jsonl")   # the last: evalnb.stages.judge_retest


class CeilingReached(NotSent):
    """The call's reservation would pass a ceiling: it is not sent."""


def usd(input_tokens: float, output_tokens: float, price: Mapping[str, float] | None) -> float:
    """Dollars for tokens at a price per million (no price: nothing)."""
    if price is None:
        return 0.0
    return (input_tokens * price["input"] + output_tokens * price["output"]) / 1e6


def endpoint_models(config: Mapping[str, Any]) -> dict[str, str]:
    """Role in the records -> model name, from a resolved configuration (config.json's shape)."""
    return {"model": config["model"]["name"],
            **{f"judge{i}": j["name"] for i, j in enumerate(config.get("judges") or [], start=1)}}


def record_cost(record: Mapping[str, Any], models: Mapping[str, str], prices: Mapping[str, Any]) -> float:
    """What one stored line says its attempts cost (see the module docstring)."""
    if not record.get("attempts"):
        return 0.0   # decided without a call
    model = models.get(str(record.get("endpoint")), str(record.get("endpoint")))
    live = prices.get(model)
    usage = record.get("usage") or {}
    price = batch_price(prices, model) if record.get("batch") else live
    total = usd(usage.get("input_tokens", 0), usage.get("output_tokens", 0), price)
    for attempt in record.get("failed_attempt_usage") or ():
        total += usd(attempt.get("input_tokens", 0), attempt.get("output_tokens", 0), live)
    return total


def run_spend(run_dir: Path, config: Mapping[str, Any] | None = None) -> float:
    """Every line of the run's stage stores, at the run's prices (config.json's unless given)."""
    if config is None:
        try:
            config = json.loads((run_dir / "config.json").read_text("utf-8"))
        except (OSError, ValueError):
            return 0.0
    assert config is not None
    models, prices = endpoint_models(config), config.get("prices") or {}
    return sum(record_cost(record, models, prices) for name in STORES for record in read_lines(run_dir / name))


# --- the ledger of one ceiling ---------------------------------------------------------------------

def _process() -> str:
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


def _settle_the_dead(data: dict[str, Any]) -> None:
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
    return os.environ.get(TOKEN_ENV) or f"process {_process()}"


@dataclass
class Hold:
    key: str
    usd: float


class Budget:
    """The ceilings of one run in one process (one per stage: opened when the stage starts)."""

    def __init__(self, config: RunConfig, ceilings: list[Ceiling]) -> None:
        self.config, self.ceilings = config, ceilings
        self.run = str(config.output_dir)
        self.prices = config.prices
        self.models = endpoint_models(config.to_dict())
        self.process = _process()

    @classmethod
    def open(cls, config: RunConfig) -> Budget | None:
        """The run's ceilings with what it has spent, read from its records; None without a budget."""
        ceilings = ceilings_of(config)
        if not ceilings:
            return None
        budget = cls(config, ceilings)
        budget.refresh()
        return budget

    def refresh(self) -> None:
        """What the records say is spent and the journal says batches hold, into every ledger."""
        spent = run_spend(self.config.output_dir, self.config.to_dict())
        batches = batches_reserved(self.config.output_dir)
        for ceiling in self.ceilings:
            with ceiling.store.transaction() as data:
                _settle_the_dead(data)
                data.setdefault("runs", {}).setdefault(self.run, {}).update(spent_usd=spent, batch_usd=batches)
                data["max_cost_usd"] = ceiling.max_usd

    def bound(self, role: str, request: ChatRequest, batch: bool = False) -> float:
        """The call's upper bound: estimated input and the whole output budget, at its price."""
        model = self.models.get(role, role)
        price = batch_price(self.prices, model) if batch else self.prices.get(model)
        return usd(request_input_tokens(request), request.max_tokens, price)

    def reserve(self, role: str, request: ChatRequest, batch: bool = False) -> Hold:
        """Hold the call's upper bound under every ceiling, or raise CeilingReached (nothing held)."""
        hold = Hold(f"{self.process}-{secrets.token_hex(4)}", self.bound(role, request, batch))
        taken: list[Ceiling] = []
        for ceiling in self.ceilings:
            with ceiling.store.transaction() as data:
                _settle_the_dead(data)
                spent, doubt, reserved = totals(data)
                if hold.usd > 0 and spent + doubt + reserved + hold.usd > ceiling.max_usd + 1e-12:
                    line = self.refusal(ceiling, spent, doubt, reserved, hold.usd)
                    data.setdefault("stopped", {})[self.run] = {"line": line, "command": command_token(),
                                                                "at": utc_now()}
                    refused = CeilingReached(line)
                else:
                    data.setdefault("held", {})[hold.key] = {"run": self.run, "usd": hold.usd,
                                                             "process": self.process}
                    refused = None
            if refused is not None:
                self._release(taken, hold, spent_usd=0.0)
                raise refused
            taken.append(ceiling)
        return hold

    def hold_batch(self, role: str, request: ChatRequest) -> float | None:
        """Reserve a call going into a provider batch, at the batch price, for as long as its
        batch is in flight (the journal keeps the sum: :func:`batches_reserved`); None: the
        ceiling refuses it (recorded as for a live call)."""
        try:
            hold = self.reserve(role, request, batch=True)
        except CeilingReached:
            return None
        for ceiling in self.ceilings:   # from this process's reservation to the run's batches
            with ceiling.store.transaction() as data:
                if data.get("held", {}).pop(hold.key, None) is not None:
                    run = data.setdefault("runs", {}).setdefault(self.run, {})
                    run["batch_usd"] = run.get("batch_usd", 0.0) + hold.usd
        return hold.usd

    def settle(self, hold: Hold, cost: float, *, in_doubt: bool = False) -> None:
        """The reservation becomes what the attempt cost (or spending in doubt)."""
        self._release(self.ceilings, hold, spent_usd=cost, in_doubt=in_doubt)

    def _release(self, ceilings: list[Ceiling], hold: Hold, *, spent_usd: float, in_doubt: bool = False) -> None:
        for ceiling in ceilings:
            with ceiling.store.transaction() as data:
                if data.get("held", {}).pop(hold.key, None) is None:
                    continue   # already settled as in doubt by another process (we looked dead)
                run = data.setdefault("runs", {}).setdefault(self.run, {})
                field = "in_doubt_usd" if in_doubt else "spent_usd"
                run[field] = run.get(field, 0.0) + spent_usd

    def refusal(self, ceiling: Ceiling, spent: float, doubt: float, reserved: float, needed: float) -> str:
        """The one line a refused call ends its command with."""
        return (f"spending ceiling of {ceiling.scope} reached: ${spent:.4f} spent so far"
                + (f" (+${doubt:.4f} in doubt)" if doubt else "")
                + f", ${reserved:.4f} reserved for calls in flight; the next call needs up to ${needed:.4f} "
                f"and the ceiling is ${ceiling.max_usd:.4f}. Its work stays resumable: {ceiling.advice} "
                "and run the same command to continue")

    def wrap(self, role: str, provider: Provider) -> BudgetedProvider:
        return BudgetedProvider(provider, self, role)


class BudgetedProvider:
    """A provider whose every attempt is reserved at its upper bound before it is sent."""

    def __init__(self, inner: Provider, budget: Budget, role: str) -> None:
        self.inner, self.budget, self.role = inner, budget, role
        self.model, self.concurrency = inner.model, inner.concurrency

    @property
    def pacer(self) -> Any:   # the progress bar shows quota waits of a paced provider inside
        return getattr(self.inner, "pacer", None)

    async def complete(self, request: ChatRequest) -> Completion:
        hold = self.budget.reserve(self.role, request)
        try:
            completion = await self.inner.complete(request)
        except Exception as failure:
            # The same rule as the record's failed_attempt_usage, so a restart reads the same spend.
            usage = failed_attempt_usage(as_provider_error(failure), request)
            self.budget.settle(hold, 0.0 if usage is None else hold.usd)
            raise
        except BaseException:   # cancelled in flight: it may have been billed, and no record will say
            self.budget.settle(hold, hold.usd, in_doubt=True)
            raise
        model = self.budget.models.get(self.role, self.role)
        completion = usage_or_estimate(completion, request, self.inner)   # a reply without usage is not free
        u = completion.usage
        self.budget.settle(hold, usd(u.input_tokens, u.output_tokens, self.budget.prices.get(model)) if u else 0.0)
        return completion

    async def aclose(self) -> None:
        await self.inner.aclose()


def open_shared_ledger(path: Path, max_usd: float, run_dirs: list[Path]) -> None:
    """A suite's ledger before its runs start: what each of its runs has spent, from the records."""
    with locked_json(path).transaction() as data:
        _settle_the_dead(data)
        runs = data.setdefault("runs", {})
        for run_dir in run_dirs:
            runs.setdefault(str(run_dir), {})["spent_usd"] = run_spend(run_dir) if (run_dir / "config.json").exists() \
                else 0.0
        data["max_cost_usd"] = max_usd
