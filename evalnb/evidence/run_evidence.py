"""A run's item evidence written from its stores and scores (the aggregate stage, and verify's
recomputation): evidence.json and tasks.html, with the contestant named and the items counted
as the views show them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evalnb.benchmarks.base import contestant_label
from evalnb.core.types import Record
from evalnb.views.words import item_plural
from evalnb.evidence.headline import metric_rows


def write_evidence(run: Any, stores: Mapping[str, Mapping[str, Record]], scores: Mapping[str, Any]) -> None:
    """Every item's evidence, as its benchmark declares it: evidence.json and tasks.html."""
    from evalnb.evidence import items as evidence

    items = run.benchmark.evidence(stores["generate"], stores["judge"], scores)
    bench = type(run.benchmark)
    model = contestant_label(bench, run.config.model.provider, run.config.model.name, run.config.options)
    evidence.write_evidence(run.dir, evidence.run_meta(scores, metric_rows(scores), bench.STATUSES, bench.ITEM_NOUN,
                                                       item_plural(bench), model), items)
