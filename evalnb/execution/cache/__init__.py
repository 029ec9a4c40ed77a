"""The response cache: a reply is never paid for twice.

One cache per user, shared by every run, suite and process on the machine
(:mod:`~evalnb.execution.cache.settings`: where, and why it is on by default), keyed by the
exact request and the sample's index (:mod:`~evalnb.execution.cache.keys`), one file per
entry written whole or not at all (:mod:`~evalnb.execution.cache.store`), looked up by the
runner before a call is sent (:mod:`~evalnb.execution.cache.reuse`), and counted per stage
for the terminal, ``status``, the report and the paper's provenance
(:mod:`~evalnb.execution.cache.summary`).
"""

from __future__ import annotations

from collections.abc import Mapping

from evalnb.core.run_config import EndpointConfig, RunConfig
from evalnb.execution.cache.reuse import CallCache
from evalnb.execution.cache.settings import settings_from


def open_call_cache(config: RunConfig, endpoints: Mapping[str, EndpointConfig]) -> CallCache | None:
    """The stage's cache for these endpoints, None when the run uses none."""
    settings = settings_from(config.cache)
    if settings is None:
        return None
    return CallCache(settings, endpoints, run=config.run_name)
