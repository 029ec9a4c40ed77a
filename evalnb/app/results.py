"""What ``run``, ``demo``, ``suite`` and ``compare`` end with: a compact table of the headline
metrics, each an estimate with its interval (:func:`evalnb.views.estimates.estimate_text`, as
every other view prints it) and its n, then where the record is; with ``--json`` the same as
one JSON document on stdout.

Everything is read from the records the command wrote (``scores.json``, ``compare.json``,
``suite.json``): the terminal shows what the record holds, never a number of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evalnb.views.estimates import estimate_text, number_text
from evalnb.records.stores import read_json_if_exists


def table_text(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    """Columns padded to their widest cell, numbers and estimates right-aligned."""
    cells = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    right = [i > 0 and all(_numeric(r[i]) for r in cells[1:]) for i in range(len(header))]
    lines = []
    for row in cells:
        lines.append(indent + "  ".join(c.rjust(w) if r else c.ljust(w)
                                        for c, w, r in zip(row, widths, right)).rstrip())
    return "\n".join(lines)


def _numeric(cell: str) -> bool:
    return bool(cell) and (cell[0].isdigit() or cell[0] in "-.")


def metric_entries(scores: Mapping[str, Any], headline_only: bool = True) -> list[dict[str, Any]]:
    """A scores.json's metrics as plain entries: name, label, value, interval, n."""
    entries = []
    for name, m in (scores.get("metrics") or {}).items():
        if headline_only and not m.get("headline"):
            continue
        ci = m.get("ci") or {}
        entries.append({"metric": name, "label": m.get("label"), "value": m.get("value"),
                        "ci_low": ci.get("low"), "ci_high": ci.get("high"),
                        # the items the estimate reads (Scored: the tasks scored), as every table shows it
                        "n": m["n"] if m.get("n") is not None else ci.get("n")})
    return entries


def contestant_text(benchmark: Any, model: Mapping[str, Any], config: Mapping[str, Any]) -> str | None:
    """What the run's contestant is, for a terminal line: ``provider:name`` for a model called
    through an endpoint; for answers read from a file (a scorer over predictions, an autorater
    over traces), the model's name when the parameters give one, else ``answers from FILE``.
    Never ``none:none``, which would read as a model of that name."""
    from evalnb.benchmarks import benchmark_for
    from evalnb.benchmarks.base import contestant_label

    if not model:
        return None
    provider, name = str(model.get("provider")), str(model.get("name"))
    if provider != "none":
        return f"{provider}:{name}"
    try:
        label = contestant_label(benchmark_for(benchmark), provider, name, config)
    except Exception:   # a plug-in that no longer imports: the file is still what answered
        label = "answers from a file"
    return label if label in (name, "answers from a file") else f"answers from {label}"


def run_results(run_dir: Path) -> dict[str, Any]:
    """A run's results document (``--json``), read from its scores.json and status.json."""
    scores = read_json_if_exists(run_dir / "scores.json") or {}
    status = read_json_if_exists(run_dir / "status.json") or {}
    config = scores.get("config") or read_json_if_exists(run_dir / "config.json") or {}
    model = config.get("model") or {}
    return {"run_dir": str(run_dir), "benchmark": scores.get("benchmark") or config.get("benchmark"),
            "run_name": scores.get("run_name") or config.get("run_name"),
            "model": contestant_text(scores.get("benchmark") or config.get("benchmark"), model, config),
            "state": status.get("state", "not aggregated"), "complete": bool(scores.get("complete")),
            "offline": bool(scores.get("offline")), **({"subset": config["subset"]} if config.get("subset") else {}),
            "metrics": metric_entries(scores), "report": _exists(run_dir / "04_report.html"),
            **_stages(run_dir, status.get("state", "not aggregated"))}


def _stages(run_dir: Path, state: str) -> dict[str, Any]:
    """Each stage's state (evalnb.records.completion); a stage that started and did not finish
    makes the run's state ``interrupted`` (or ``running``), whatever status.json said before."""
    from evalnb.records.completion import stage_states, unfinished
    from evalnb.records.lock import held_by

    held = held_by(run_dir) is not None
    states = {s: {"state": st.state, **({"cell": st.cell, "cells": st.cells} if st.cell else {})}
              for s, st in stage_states(run_dir, held).items()}
    stopped = unfinished(run_dir, held)
    if stopped is None:
        return {"stages": states}
    return {"stages": states, "state": stopped.state if stopped.state != "failed" else f"{stopped.stage} failed",
            "complete": False, "unfinished_stage": stopped.stage}


def run_text(doc: Mapping[str, Any]) -> str:
    head = f"{doc['run_name']} ({doc['benchmark']}; {doc['model']}): {doc['state']}"
    if doc.get("offline"):
        head += " [offline approximation]"
    if doc.get("subset"):
        head += f" [subset {_subset_text(doc['subset'])}: not comparable with the full run]"
    lines = [head]
    if doc["metrics"]:
        from evalnb.views.labels import estimate_title, header

        rows = [[(m["label"] or m["metric"]).split(":")[0], estimate_text(m["value"], m["ci_low"], m["ci_high"]),
                 "-" if m["n"] is None else str(m["n"]), m["label"] or ""] for m in doc["metrics"]]
        lines.append(table_text([header("metric"), estimate_title("value"), header("n"), header("description")], rows))
    else:
        lines.append("  no headline numbers yet (the aggregate stage has not run)")
    lines.append(f"record: {doc['run_dir']}" + (f"  (report: {doc['report']})" if doc.get("report") else ""))
    return "\n".join(lines)


def _subset_text(subset: Mapping[str, Any]) -> str:
    return f"first {subset['limit']} items" if "limit" in subset else f"{len(subset['items'])} named items"


def compare_results(out: Path) -> dict[str, Any]:
    """A comparison's ranking (``--json``), read from its compare.json and the runs' scores."""
    data = read_json_if_exists(out / "compare.json") or {}
    board = (data.get("tables") or {}).get("leaderboard") or []
    first = (data.get("runs") or [{}])[0].get("dir")
    entries = metric_entries(read_json_if_exists(Path(first) / "scores.json") or {}) if first else []
    headline = [m["metric"] for m in entries] or headline_of(data.get("benchmark"))
    rows = []
    for place, row in enumerate(board, start=1):
        # The leaderboard's own rank (ties averaged) and how sure it is, when compare computed them;
        # each metric's own n (Scored rests on the tasks scored, All on every task).
        rows.append({"rank": row.get("rank") if row.get("rank") is not None else place,
                     "rank_interval": row.get("rank_interval"), "p_first": row.get("p_first"),
                     "model": row.get("model"), "run": row.get("run"), "n": row.get("n"),
                     "metrics": {m: {"value": row.get(m), "ci_low": row.get(f"{m}_ci_low"),
                                     "ci_high": row.get(f"{m}_ci_high"),
                                     "n": row.get(f"{m}_n") if row.get(f"{m}_n") is not None else row.get("n"),
                                     # beside the protocol's interval, where the benchmark declares clusters
                                     **({"cluster_low": row.get(f"{m}_cluster_low"),
                                         "cluster_high": row.get(f"{m}_cluster_high")}
                                        if f"{m}_cluster" in row else {})} for m in headline}})
    return {"compare_dir": str(out), "benchmark": data.get("benchmark"), "headline": headline,
            "words": metric_words_of(data.get("benchmark"), entries), "ranking": rows,
            "pairwise": (data.get("tables") or {}).get("pairwise") or [], "report": _exists(out / "05_compare.html")}


def headline_of(benchmark: Any) -> list[str]:
    """The benchmark's headline metrics (for runs whose scores.json lists none)."""
    from evalnb.benchmarks import benchmark_for
    from evalnb.core.errors import ConfigError

    try:
        return [m.name for m in benchmark_for(benchmark, "compare").metrics() if m.headline] if benchmark else []
    except ConfigError:
        return []


def metric_words_of(benchmark: Any, entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each metric's word as the leaderboard shows it: the benchmark's own labels, else the
    record's."""
    words = {m["metric"]: (m["label"] or m["metric"]).split(":")[0] for m in entries}
    if benchmark:
        from evalnb.benchmarks import benchmark_for
        from evalnb.core.errors import ConfigError
        from evalnb.views.labels import metric_words

        try:
            words |= metric_words(benchmark_for(benchmark, "compare").metrics())
        except ConfigError:   # a benchmark this install does not have: the record's own labels
            pass
    return words


def estimate_cells(entry: Mapping[str, Any] | None) -> list[str]:
    """An estimate with its interval, and its own n beside it."""
    if not entry:
        return ["-", "-"]
    return [estimate_text(entry["value"], entry["ci_low"], entry["ci_high"]),
            "-" if entry.get("n") is None else f"{entry['n']:g}"]


def compare_text(doc: Mapping[str, Any]) -> str:
    from evalnb.views.labels import CI, CLUSTER_CI, header

    lines = [f"comparison of {len(doc['ranking'])} runs ({doc['benchmark']}), ranked as the leaderboard ranks them"]
    sure = any(r.get("rank_interval") for r in doc["ranking"])   # rank intervals, P(first)
    words = doc.get("words") or {}
    beside = [m for m in doc["headline"] if any("cluster_low" in r["metrics"][m] for r in doc["ranking"])]
    rows = [[f"{r['rank']:g}", str(r["model"]), *(c for m in doc["headline"] for c in estimate_cells(r["metrics"][m])),
             *(estimate_text(r["metrics"][m]["value"], r["metrics"][m].get("cluster_low"),
                             r["metrics"][m].get("cluster_high")) for m in beside),
             *([r.get("rank_interval") or "-", "-" if r.get("p_first") is None else number_text(r["p_first"])]
               if sure else [])]
            for r in doc["ranking"]]
    titles = [t for m in doc["headline"] for t in (f"{words.get(m, m)} {CI}", header("n"))]
    lines.append(table_text([header("rank"), header("model"), *titles,
                             *(f"{words.get(m, m)}: {CLUSTER_CI}" for m in beside),
                             *([header("rank_interval"), header("p_first")] if sure else [])], rows))
    if doc.get("pairwise"):   # the notebook's and the exports' table (one layout)
        from evalnb.views.pairwise import pairwise_text   # pandas: only when there is a table

        alpha = doc["pairwise"][0].get("alpha")
        lines.append("pairwise verdicts" + (f" at alpha = {alpha:g}" if alpha is not None else "")
                     + ", on the Holm-adjusted p over every pair")
        lines += ["  " + line for line in pairwise_text(doc["pairwise"], words).splitlines()]
    lines.append(f"record: {doc['compare_dir']}" + (f"  (report: {doc['report']})" if doc.get("report") else ""))
    return "\n".join(lines)


def suite_results(suite_dir: Path, record: Mapping[str, Any]) -> dict[str, Any]:
    """A suite's results: each contestant's run results, and the leaderboard's ranking."""
    runs = {name: {"state": row["state"], **run_results(Path(row["run_dir"]))}
            for name, row in (record.get("runs") or {}).items()}
    for name, row in (record.get("runs") or {}).items():
        runs[name]["state"] = row["state"]
    board = record.get("leaderboard") or {}
    ranking = compare_results(Path(board["dir"])) if board.get("dir") else None
    return {"suite_dir": str(suite_dir), "suite_name": record.get("suite_name"), "runs": runs,
            "leaderboard": {"state": board.get("state", "none"), **({"ranking": ranking["ranking"]} if ranking else {})}}


def suite_text(doc: Mapping[str, Any]) -> str:
    from evalnb.views.labels import CI, header

    words = {m["metric"]: (m["label"] or m["metric"]).split(":")[0] for r in doc["runs"].values() for m in r["metrics"]}
    metrics = sorted(words)
    rows = []
    for name, run in doc["runs"].items():
        by_name = {m["metric"]: m for m in run["metrics"]}
        rows.append([name, run["state"], *(c for m in metrics for c in estimate_cells(by_name.get(m)))])
    titles = [t for m in metrics for t in (f"{words[m]} {CI}", header("n"))]
    lines = [f"suite {doc['suite_name']}: {len(rows)} contestants",
             table_text([header("contestant"), header("state"), *titles], rows),
             f"leaderboard: {doc['leaderboard']['state']}", f"record: {doc['suite_dir']}"]
    return "\n".join(lines)


def _exists(path: Path) -> str | None:
    return str(path) if path.exists() else None
