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

from evalnb.views.estimates import estimate_text
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
            "metrics": metric_entries(scores), "report": _exists(run_dir / "04_report.html")}


def run_text(doc: Mapping[str, Any]) -> str:
    head = f"{doc['run_name']} ({doc['benchmark']}; {doc['model']}): {doc['state']}"
    if doc.get("offline"):
        head += " [offline approximation]"
    if doc.get("subset"):
        head += f" [subset {_subset_text(doc['subset'])}: not comparable with the full run]"
    lines = [head]
    if doc["metrics"]:
        rows = [[m["metric"], estimate_text(m["value"], m["ci_low"], m["ci_high"]),
                 "-" if m["n"] is None else str(m["n"]), m["label"] or ""] for m in doc["metrics"]]
        lines.append(table_text(["metric", "estimate [95% CI]", "n", "what it is"], rows))
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
    headline = [m["metric"] for m in metric_entries(read_json_if_exists(Path(first) / "scores.json") or {})] \
        if first else []
    rows = []
    for place, row in enumerate(board, start=1):
        # The leaderboard's own rank (ties averaged) and how sure it is, when compare computed them.
        rows.append({"rank": row.get("rank") if row.get("rank") is not None else place,
                     "rank_interval": row.get("rank_interval"), "p_first": row.get("p_first"),
                     "model": row.get("model"), "run": row.get("run"), "n": row.get("n"),
                     "metrics": {m: {"value": row.get(m), "ci_low": row.get(f"{m}_ci_low"),
                                     "ci_high": row.get(f"{m}_ci_high")} for m in headline}})
    return {"compare_dir": str(out), "benchmark": data.get("benchmark"), "headline": headline, "ranking": rows,
            "pairwise": (data.get("tables") or {}).get("pairwise") or [], "report": _exists(out / "05_compare.html")}


def compare_text(doc: Mapping[str, Any]) -> str:
    lines = [f"comparison of {len(doc['ranking'])} runs ({doc['benchmark']}), ranked as the leaderboard ranks them"]
    sure = any(r.get("rank_interval") for r in doc["ranking"])   # rank intervals, P(first)
    rows = [[f"{r['rank']:g}", str(r["model"]), *(estimate_text(r["metrics"][m]["value"], r["metrics"][m]["ci_low"],
                                                                 r["metrics"][m]["ci_high"]) for m in doc["headline"]),
             "-" if r["n"] is None else str(r["n"]),
             *([r.get("rank_interval") or "-", "-" if r.get("p_first") is None else f"{r['p_first']:.2f}"] if sure else [])]
            for r in doc["ranking"]]
    lines.append(table_text(["rank", "model", *doc["headline"], "n", *(["rank interval", "P(first)"] if sure else [])],
                            rows))
    if doc.get("pairwise"):   # the notebook's and the exports' table (one layout)
        from evalnb.views.pairwise import pairwise_text   # pandas: only when there is a table

        alpha = doc["pairwise"][0].get("alpha")
        lines.append("pairwise verdicts" + (f" at alpha = {alpha:g}" if alpha is not None else "")
                     + ", on the Holm-adjusted p over every pair")
        lines += ["  " + line for line in pairwise_text(doc["pairwise"]).splitlines()]
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
    metrics = sorted({m["metric"] for r in doc["runs"].values() for m in r["metrics"]})
    rows = []
    for name, run in doc["runs"].items():
        by_name = {m["metric"]: m for m in run["metrics"]}
        rows.append([name, run["state"], *(estimate_text(by_name[m]["value"], by_name[m]["ci_low"], by_name[m]["ci_high"])
                                           if m in by_name else "-" for m in metrics),
                     str(next((by_name[m]["n"] for m in metrics if m in by_name and by_name[m]["n"] is not None), "-"))])
    lines = [f"suite {doc['suite_name']}: {len(rows)} contestants",
             table_text(["contestant", "state", *metrics, "n"], rows),
             f"leaderboard: {doc['leaderboard']['state']}", f"record: {doc['suite_dir']}"]
    return "\n".join(lines)


def _exists(path: Path) -> str | None:
    return str(path) if path.exists() else None
