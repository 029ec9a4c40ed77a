"""``--limit N`` and ``--items ID,...`` of ``evalnb run`` and ``evalnb estimate``: the
``subset`` parameter (:mod:`evalnb.core.subset`), and a run name and directory of the run's
own, ``RUN_NAME-limit5`` beside ``RUN_NAME``, so a trial never writes into the full run."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from evalnb.core.errors import ConfigError
from evalnb.core.subset import check_subset, suffix


def subset_sets(params: Path, sets: Sequence[str], limit: int | None, items: Sequence[str] | None) -> list[str]:
    """``sets`` with the subset, run name and output directory a ``--limit``/``--items`` run
    takes (``sets`` as they are without either)."""
    if limit is None and not items:
        return list(sets)
    from evalnb.app.suite.config import is_suite_file
    from evalnb.pipeline.run import load_config

    if is_suite_file(params):
        raise ConfigError(f"{params}: --limit and --items apply to a run's parameters file, not a suite")
    subset = check_subset({"limit": limit} if limit is not None else {"items": list(items or ())}, str(params))
    assert subset is not None
    config, _ = load_config(params, sets)   # the names as the parameters and --set leave them
    end = suffix(subset)
    # JSON is YAML: --set reads the values as YAML, and an id or a path with a colon stays whole.
    return [*sets, f"subset={json.dumps(subset)}", f"run_name={json.dumps(f'{config.run_name}-{end}')}",
            f"output_dir={json.dumps(str(config.output_dir.with_name(f'{config.output_dir.name}-{end}')))}"]
