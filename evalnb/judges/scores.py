"""The judges' reliability and length bias within one run, for ``scores.json`` and the report.

What applies: the panel statistics (Krippendorff's alpha, each judge's offset from the panel
mean) need a panel, two or more configured judges scoring the same items; an autorater's
independent runs of one judge are repeats of one judge, not a panel, and one judge has
nothing to agree with (docs/statistics.md says which benchmark has what). Length bias needs
an LLM verdict per item and the response it read, so it applies wherever a benchmark
declares per-judge scores. Where nothing applies the section is absent from ``scores.json`` and the report's
cells show nothing.

Intervals resample items, or whole clusters where the benchmark's ItemResults declares them
(``clusters``: item -> cluster; lane E adds the declaration): one resample shared by every
number. ``n_boot`` and ``seed`` are the run's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evalnb.benchmarks.base import cluster_noun
from evalnb.stats import judge_bias, reliability
from evalnb.records.stores import read_json_if_exists
from evalnb.stats.intervals import Interval
from evalnb.core.types import ItemResults, Record

SECTION = "judge_statistics"


def judge_labels(results: ItemResults) -> list[str]:
    """Every judge label the items carry, in the order first seen."""
    return list(dict.fromkeys(label for item in results.ids for label in results.judges.get(item, {})))


def is_panel(config: Mapping[str, Any], results: ItemResults) -> bool:
    """Two or more configured judges whose scores the items carry (not one judge's runs)."""
    return len(config.get("judges") or []) >= 2 and len(judge_labels(results)) >= 2


def judge_family(config: Mapping[str, Any], label: str) -> str | None:
    """The ``family`` of the configured judge a label names (``judge2 model-x`` is judges[1])."""
    role = label.split(" ", 1)[0]
    judges = config.get("judges") or []
    if role.startswith("judge") and role[5:].isdigit() and 0 < int(role[5:]) <= len(judges):
        return judges[int(role[5:]) - 1].get("family")
    return None


def clusters_of(results: ItemResults, ids: Sequence[str], bench: Any = None) -> tuple[list[Any] | None, str]:
    """Each item's cluster and what a cluster is (the benchmark's ``CLUSTER_NOUN``), where the
    benchmark declares them; else (None, the item noun): each item its own cluster."""
    declared: Mapping[str, Any] = getattr(results, "clusters", None) or {}
    if declared and all(i in declared for i in ids):
        return [declared[i] for i in ids], cluster_noun(bench) if bench is not None else "cluster"
    return None, str(getattr(bench, "ITEM_NOUN", "item"))


def judge_matrix(results: ItemResults, labels: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Items with at least one verdict, and their items x judges matrix (NaN: no verdict)."""
    ids = [i for i in results.ids if results.judges.get(i)]
    return ids, np.array([[results.judges[i].get(label, np.nan) for label in labels] for i in ids],
                         dtype=float).reshape(len(ids), len(labels))


def response_lengths(generate: Mapping[str, Record]) -> dict[str, int]:
    """Each answered item's response length in characters (the text the judges were sent)."""
    return {str(r.get("task_id", key)): len(r["text"]) for key, r in generate.items()
            if r.get("status") == "ok" and isinstance(r.get("text"), str)}


def stored_lengths(run_dir: Any) -> dict[str, int]:
    """:func:`response_lengths` from a finished run's ``responses.json``."""
    data = read_json_if_exists(run_dir / "responses.json") or {}
    return {r["task_id"]: len(r["response"]) for r in data.get("records", [])
            if r.get("status") == "ok" and isinstance(r.get("response"), str)}


def as_json(interval: Interval) -> dict[str, Any]:
    return {"value": interval.mean, "low": interval.low, "high": interval.high, "n": interval.n}


def panel_statistics(config: Mapping[str, Any], results: ItemResults, lengths: Mapping[str, int], *,
                     n_boot: int, seed: int, bench: Any = None) -> dict[str, Any]:
    """The run's judge statistics (empty when none applies)."""
    labels = judge_labels(results)
    if not labels:
        return {}
    ids, matrix = judge_matrix(results, labels)
    clusters, unit = clusters_of(results, ids, bench)
    out: dict[str, Any] = {"judges": [{"judge": label, "family": judge_family(config, label)} for label in labels],
                           "n_boot": n_boot, "seed": seed, "resampled": unit,
                           "method": reliability.CLUSTER_METHOD.format(unit=unit)}
    if is_panel(config, results):
        out["alpha"] = as_json(reliability.alpha_interval(matrix, n_boot=n_boot, seed=seed, clusters=clusters,
                                                          unit=unit))
        out["alpha"]["note"] = reliability.alpha_note(len(set(clusters)) if clusters is not None else len(ids))
        offsets = reliability.judge_offsets(matrix, n_boot=n_boot, seed=seed, clusters=clusters, unit=unit)
        out["offsets"] = {label: as_json(o) for label, o in zip(labels, offsets)}
    with_length = [k for k, i in enumerate(ids) if i in lengths]
    if len(with_length) > 2:
        chars = np.array([lengths[ids[k]] for k in with_length], dtype=float)
        sub = None if clusters is None else [clusters[k] for k in with_length]
        out["length"] = {label: {name: as_json(v) for name, v in judge_bias.length_bias(
            matrix[with_length, j], chars, n_boot=n_boot, seed=seed, clusters=sub, unit=unit).items()}
            for j, label in enumerate(labels)}
    return out if "alpha" in out or "length" in out else {}   # nothing applies: no section


def scores_section(bench: Any, config: Mapping[str, Any], body: Mapping[str, Any],
                   generate: Mapping[str, Record]) -> dict[str, Any]:
    """``{"judge_statistics": ...}`` for a scores.json body, or nothing when no judge statistic
    applies. Computed from the body and the stores alone (so ``evalnb verify`` recomputes it)."""
    results = bench.results(body)
    stats = panel_statistics(config, results, response_lengths(generate),
                             n_boot=int(config.get("n_boot", 10_000)), seed=int(config.get("seed", 0)), bench=bench)
    return {SECTION: stats} if stats else {}


# --- how the views show a stored estimate -----------------------------------------------------------------

def stored_columns(name: str, entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stored estimate (``{"value", "low", "high"}``) as a table's raw columns ``name``,
    ``name_low``, ``name_high``, which :func:`evalnb.views.tables.intervals_layout` shows as
    one cell (missing parts: None, shown ``-``)."""
    entry = entry or {}
    return {name: entry.get("value"), f"{name}_low": entry.get("low"), f"{name}_high": entry.get("high")}
