"""The spending ceiling: no call is sent that could pass it.

``budget: {max_cost_usd: N}`` in a run's parameters bounds that run; ``evalnb suite`` adds
``budget.suite`` to each contestant, a ceiling over all the suite's runs together. Each
ceiling keeps a ledger (``spend.json`` in the run directory, or in the suite directory),
changed only under its file lock (:class:`evalnb.providers.ledger.LockedJson`), so that the
processes of a suite share one account (:mod:`evalnb.execution.ceilings`).

What counts against a ceiling, in US dollars at the configured ``prices``:

- spent (:mod:`evalnb.execution.spend`): every stored record's reported usage (at the batch
  price for a call answered inside a provider batch) and its failed attempts' ``failed_attempt_usage`` (:func:`evalnb.providers.retry.failed_attempt_usage`),
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

import secrets
from dataclasses import dataclass
from typing import Any

from evalnb.config import RunConfig
from evalnb.records.manifest import utc_now
from evalnb.execution.batch import batch_price
from evalnb.execution.ceilings import (Ceiling, batches_reserved, ceilings_of, command_token, settle_the_dead,
                                       this_process, totals)
from evalnb.execution.spend import endpoint_models, run_spend, usd
from evalnb.providers.base import ChatRequest, Completion, Provider
from evalnb.providers.retry import NotSent, as_provider_error, failed_attempt_usage, request_input_tokens, usage_or_estimate

# Importable from here as before: the ledger's file name, and a suite's shared ledger opened.
from evalnb.execution.ceilings import LEDGER_NAME as LEDGER_NAME, open_shared_ledger as open_shared_ledger


class CeilingReached(NotSent):
    """The call's reservation would pass a ceiling: it is not sent."""


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
        self.process = this_process()

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
                settle_the_dead(data)
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
                settle_the_dead(data)
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
