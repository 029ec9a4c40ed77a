"""The judges' retest study: a seeded sample of answers judged K more times under the same
settings, in a store of its own (``judge_retest.jsonl``), never touching the protocol's
verdicts or scores.

``judge_retest: {sample: M, repeats: K, seed: S}`` in the parameters (checked by
:func:`evalnb.config.check_judge_retest`; not part of the fingerprint: the protocol's calls
and scores are the same with or without it). The study's calls are the protocol's own judge
calls (the same prompt, settings, parser and endpoint), each made K more times under the key
``<protocol key>::retest<k>``. Which answers: M items drawn without replacement (numpy's
PCG64 seeded with S) from the items whose every protocol verdict is in, sorted by id, so
the sample is fixed once the judge stage is complete; until then the study waits. A verdict
decided without a call (an exact match) is deterministic and is not retested.

Each judge's verdicts on one answer (its protocol verdict and the K retests) are the groups
of a one-way random-effects decomposition (:func:`evalnb.stats.reliability.retest`): its
test-retest standard deviation and the share of its score variance that is noise; and, for a
panel, the share of the item score's variance (the panel mean) that is judge noise.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from evalnb.stats import reliability
from evalnb.records.stores import JsonlStore
from evalnb.core.run_config import RunConfig
from evalnb.core.types import CALL_STAGES, Call, Prepared, Record
from evalnb.judges.scores import as_json

STAGE = "judge_retest"
SECTION = "judge_retest"
MARK = "::retest"


def _repeat(prepare: Callable[[], Prepared], of: str, repeat: int) -> Prepared:
    prepared = prepare()
    return Prepared(prepared.request, {**prepared.fields, "retest_of": of, "repeat": repeat})


def eligible(calls: Sequence[Call], verdicts: Mapping[str, Record] | None,
             done: Callable[[Record], bool]) -> dict[str, list[tuple[Call, Prepared]]]:
    """Item -> its judge calls that send a request; with ``verdicts``, only items whose every
    protocol verdict is done (``None``: every item, as an estimate assumes)."""
    items: dict[str, list[tuple[Call, Prepared]]] = defaultdict(list)
    finished: dict[str, bool] = defaultdict(lambda: True)
    for call in calls:
        prepared = call.prepare()
        item = str(prepared.fields.get("task_id", call.key))
        if verdicts is not None:
            record = verdicts.get(call.key)
            finished[item] &= record is not None and done(record)
        if prepared.request is not None:
            items[item].append((call, prepared))
    return {item: pairs for item, pairs in items.items() if finished[item]}


def sample(items: Sequence[str], size: int, seed: int) -> list[str]:
    """``size`` of ``items`` (all when fewer), drawn without replacement, seeded, sorted."""
    pool = sorted(items)
    if size >= len(pool):
        return pool
    chosen = np.random.default_rng(seed).choice(len(pool), size=size, replace=False)
    return sorted(pool[int(i)] for i in chosen)


def retest_calls(spec: Mapping[str, int], calls: Sequence[Call], verdicts: Mapping[str, Record] | None,
                 done: Callable[[Record], bool]) -> list[Call]:
    """The study's calls: every protocol judge call of the sampled items, K more times."""
    items = eligible(calls, verdicts, done)
    out = []
    for item in sample(list(items), spec["sample"], spec["seed"]):
        for call, _ in items[item]:
            out += [Call(f"{call.key}{MARK}{k}", call.endpoint, functools.partial(_repeat, call.prepare, call.key, k),
                         call.interpret, cached=False) for k in range(1, spec["repeats"] + 1)]
    return out


def digested_stages(config: RunConfig) -> tuple[str, ...]:
    """The stores whose digests the aggregate records and a rerun compares: the protocol's
    stages, and the retest study's when the run has one (its new verdicts change scores.json)."""
    return (*CALL_STAGES, STAGE) if config.judge_retest else tuple(CALL_STAGES)


def store_records(run_dir: Any) -> dict[str, Record]:
    return JsonlStore(run_dir / f"{STAGE}.jsonl").load()


# --- the study's numbers ------------------------------------------------------------------------------

def _score(record: Record | None) -> float:
    return float(record["score"]) if record and record.get("status") == "ok" and record.get("score") is not None \
        else np.nan


def summary(config: RunConfig, protocol: Mapping[str, Record], retests: Mapping[str, Record]) -> dict[str, Any]:
    """Per judge, over the sampled answers: the test-retest SD and the noise share, with their
    intervals; for a panel, the noise share of the item score; and what is still to do."""
    spec = config.judge_retest or {}
    names = {role: f"{role} {j.name}" for role, j in config.judge_roles()}
    groups: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))   # judge -> item -> retests
    retested: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))   # -> protocol keys
    for key, record in retests.items():
        of = str(record.get("retest_of", key.rsplit(MARK, 1)[0]))
        judge, item = str(record["endpoint"]), str(record.get("task_id", of))
        groups[judge][item].append(_score(record))
        retested[judge][item].add(of)
    n_boot, seed = int(config.options.get("n_boot", 10_000)), int(spec.get("seed", 0))
    judges, matrices = {}, {}
    for judge in sorted(groups):
        items = sorted(groups[judge])
        # the protocol's verdict(s) first, then the retests: all made under the same settings
        rows = [[_score(protocol.get(k)) for k in sorted(retested[judge][i])] + groups[judge][i] for i in items]
        width = max(len(r) for r in rows)
        matrix = np.array([r + [np.nan] * (width - len(r)) for r in rows], dtype=float)
        matrices[judge] = (items, matrix)
        numbers = reliability.retest(matrix, n_boot=n_boot, seed=seed)
        judges[names.get(judge, judge)] = {
            "answers": len(items), "verdicts": int((~np.isnan(matrix)).sum()),
            "failed": sum(1 for r in retests.values() if r["endpoint"] == judge and r.get("status") != "ok"),
            **{name: as_json(v) for name, v in numbers.items()}, "note": reliability.retest_note(len(items))}
    out: dict[str, Any] = {"sample": spec.get("sample"), "repeats": spec.get("repeats"), "seed": seed,
                           "n_boot": n_boot, "calls": len(retests), "judges": judges}
    panel = _panel_share(matrices, n_boot, seed)
    if panel is not None:
        out["panel_noise_share"] = panel
    return out


def _panel_share(matrices: Mapping[str, tuple[list[str], np.ndarray]], n_boot: int, seed: int) -> dict[str, Any] | None:
    """Over the answers every judge retested: Var(noise of the panel mean) / Var(item score)."""
    if len(matrices) < 2:
        return None
    common = sorted(set.intersection(*(set(items) for items, _ in matrices.values())))
    if len(common) < 3:
        return None
    aligned = [m[[items.index(i) for i in common]] for items, m in matrices.values()]
    panel_scores = np.mean([m[:, 0] for m in aligned], axis=0)   # each judge's protocol verdict
    return as_json(reliability.panel_noise_share(aligned, panel_scores, n_boot=n_boot, seed=seed))


def scores_section(config: RunConfig, protocol: Mapping[str, Record], retests: Mapping[str, Record]) -> dict[str, Any]:
    """``{"judge_retest": ...}`` for scores.json when the study has records (else nothing)."""
    return {SECTION: summary(config, protocol, retests)} if retests and config.judge_retest else {}
