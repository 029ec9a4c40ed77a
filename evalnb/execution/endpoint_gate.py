"""The first endpoint failure stops its endpoint's calls for the rest of the stage.

An endpoint that refuses a request for reasons of its own (a key it rejects, a model or route
it does not have, an exhausted account: :mod:`evalnb.providers.failures`) would refuse every
other request of the stage the same way. So the first such reply closes the endpoint's gate:
no further attempt is sent to it (not a new call, not a retry of a call in flight), calls
already in flight are let finish and are recorded as they end, and every call not sent stays
unanswered, without a record, to be made by the next pass. Other endpoints of the stage (the
other judges of a panel) go on.

Which endpoints have stopped is one mapping per stage (:data:`Stopped`), shared by every gate of
the stage and by its batches (:mod:`evalnb.execution.batch.engine`): in batch mode a stage makes
live calls in several rounds (an endpoint's live calls, and each poll's resends with ``resend:
live``), and a refusal met in any of them, or by a batch, must hold for all the others.
"""

from __future__ import annotations

from typing import Any

from evalnb.providers.base import ChatRequest, Completion, Provider, ProviderError
from evalnb.providers.retry import NotSent


class EndpointStopped(NotSent):
    """An attempt not sent: its endpoint refused an earlier one for reasons of its own."""


# Role -> the first endpoint failure met by that endpoint in the stage (live or in a batch).
Stopped = dict[str, ProviderError]


class EndpointGate:
    """A provider whose calls stop at its endpoint's first endpoint failure in the stage."""

    def __init__(self, inner: Provider, role: str, stops: Stopped | None = None) -> None:
        self.inner, self.role = inner, role
        self.model, self.concurrency = inner.model, inner.concurrency
        self.stops: Stopped = {} if stops is None else stops   # the stage's, shared with its other gates

    @property
    def stopped(self) -> ProviderError | None:
        """The first endpoint failure of this endpoint in the stage, once it came."""
        return self.stops.get(self.role)

    @property
    def pacer(self) -> Any:   # the progress bar shows quota waits of a paced provider inside
        return getattr(self.inner, "pacer", None)

    async def complete(self, request: ChatRequest) -> Completion:
        if self.stopped is not None:
            raise EndpointStopped(f"{self.role} stopped: {self.stopped.message}")
        try:
            return await self.inner.complete(request)
        except ProviderError as failure:
            if failure.kind == "endpoint":
                self.stops.setdefault(self.role, failure)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()
