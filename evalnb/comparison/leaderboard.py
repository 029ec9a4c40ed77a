"""The leaderboard of a comparison: every declared metric of each run with its seeded percentile
bootstrap interval (the protocol's own procedure), the joint cluster bootstrap behind the ranks
and pairwise verdicts (made once per comparison), the leaderboard's figure, and ``compare.json``.

Opening and checking the runs is :mod:`evalnb.comparison.compare`; this module starts from an
open :class:`~evalnb.comparison.compare.Comparison`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from evalnb.stats import bounded, clustered, intervals as stats
from evalnb.benchmarks import Benchmark
from evalnb.benchmarks.base import declared_metrics
from evalnb.core.types import ItemResults, Metric
from evalnb.records.fingerprint import comparable_parts
from evalnb.records.stores import write_json
from evalnb.evidence.failures import failed_items
from evalnb.stats.metric_n import items_read
from evalnb.views.labels import CI, CLUSTER_CI, WILSON_CI
from evalnb.views.tables import Estimate, Layout, estimates_layout, readable
from evalnb.comparison import joint as joint_stats
from evalnb.comparison.compare import Comparison, RunRecord

if TYPE_CHECKING:
    from evalnb.views.figures import ReportFigure


def _strata(results: ItemResults, ids: Sequence[str] | None = None) -> list[str]:
    return [results.strata.get(i, "") for i in (results.ids if ids is None else ids)]


def intervals(cmp: Comparison, run: RunRecord) -> dict[str, stats.Interval]:
    """Every metric the benchmark declares, with the compare's bootstrap settings."""
    return all_intervals(cmp, [run])[0]


def all_intervals(cmp: Comparison, runs: Sequence[RunRecord]) -> list[dict[str, stats.Interval]]:
    """:func:`intervals` of each run, the runs with the same strata (a task set) and the same
    metrics (which may follow the data) resampled by one set of draws
    (:func:`evalnb.stats.intervals.metric_intervals_many`): each run's numbers are those it gets
    alone, drawn once instead of once per run."""
    found: dict[int, dict[str, stats.Interval]] = {}
    groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[int]] = {}
    declared: dict[int, Sequence[Metric]] = {}
    for k, run in enumerate(runs):
        results = run.results(cmp.benchmark)
        declared[k] = declared_metrics(cmp.benchmark, results)
        key = (tuple(_strata(results)), tuple(m.name for m in declared[k]))
        groups.setdefault(key, []).append(k)
    for (strata, _), members in groups.items():
        subjects = [(runs[k].results(cmp.benchmark).values, runs[k].results(cmp.benchmark).channels) for k in members]
        got = stats.metric_intervals_many(subjects, declared[members[0]], strata=list(strata), n_boot=cmp.n_boot,
                                          seed=cmp.seed,
                                          resample_repeats=getattr(cmp.benchmark, "RESAMPLE_REPEATS", True))
        found |= dict(zip(members, got))
    return [found[k] for k in range(len(runs))]


def headline_metrics(cmp: Comparison) -> list[Metric]:
    return [m for m in cmp.benchmark.metrics() if m.headline]


def joint(cmp: Comparison) -> joint_stats.Joint:
    """The headline metrics of every run on one cluster bootstrap (pairs and ranks), made once."""
    if cmp._joint is None:
        cmp._joint = joint_stats.joint_bootstrap(cmp.benchmark, [(r.label, r.results(cmp.benchmark)) for r in cmp.runs],
                                                 headline_metrics(cmp), n_boot=cmp.n_boot, seed=cmp.seed)
    return cmp._joint


def leaderboard(cmp: Comparison) -> pd.DataFrame:
    """Models sorted by the first headline metric, every declared metric with its seeded
    percentile bootstrap interval (the same procedure and metrics as each run's own report);
    ``n`` its items, ``failed`` how many of them ended in a failure (scored 0)."""
    rows = []
    for run, found in zip(cmp.runs, all_intervals(cmp, cmp.runs)):
        results = run.results(cmp.benchmark)
        metrics = {m.name: m for m in declared_metrics(cmp.benchmark, results)}   # metrics that follow the data
        row: dict[str, Any] = {"model": run.label, "run": run.scores["run_name"], "offline": run.offline,
                               "n": len(results.ids), "failed": failed_items(results.statuses)}
        for name, interval in found.items():
            row[name] = interval.mean
            if interval.method != "no interval":
                row |= {f"{name}_ci_low": interval.low, f"{name}_ci_high": interval.high,
                        f"{name}_n": items_read(results.values, metrics[name], _strata(results), results.channels)}
        rows.append(row)
    first = headline_metrics(cmp)[0].name
    if any(m.name == first for m in joint(cmp).metrics):   # how sure the order is (evalnb.stats.ranks)
        ranks = joint_stats.ranks(joint(cmp), first)
        for row in rows:
            rank = ranks[row["model"]]
            row |= {"rank": rank.rank, "rank_interval": rank.interval_text, "p_first": rank.p_first}
            if rank.note:   # few clusters: the order's uncertainty withheld or approximate, and why
                row["rank_note"] = rank.note
    near = near_bound_metrics(joint(cmp))
    for row in rows:
        row |= cluster_columns(joint(cmp), row["model"]) | bounded_columns(joint(cmp), row["model"], near)
        if zero := [m.name for m in headline_metrics(cmp) if row.get(f"{m.name}_ci_low") is not None
                    and row.get(f"{m.name}_ci_low") == row.get(f"{m.name}_ci_high")]:
            row["note"] = (f"{', '.join(zero)}: zero-width interval, every resample gave the same value "
                           "(not certainty: the items show no spread)")
    table = pd.DataFrame(rows).sort_values(first, ascending=False).set_index("model")
    cmp.tables["leaderboard"] = table
    return readable(table, leaderboard_layout(cmp.benchmark, list(table.columns)))


def cluster_columns(found: joint_stats.Joint, model: str) -> dict[str, Any]:
    """Beside the protocol's item-bootstrap interval, where the results declare clusters that
    items share: each headline metric's cluster interval (the clustered SE with Student t on
    clusters − strata degrees of freedom, the interval whose coverage holds from few clusters
    on: :mod:`evalnb.stats.smallsample`), and the clusters it rests on. The protocol's own
    columns are untouched."""
    if not clustered.has_clusters(found.design):
        return {}
    out: dict[str, Any] = {}
    for metric in found.metrics:
        form = found.forms[(model, metric.name)]
        found_se = clustered.uncertainty(form, found.design)
        t_ci = clustered.small_sample(form, found.design, found_se, found.cluster_noun)["t_ci"]
        out |= {f"{metric.name}_cluster": form.value(), f"{metric.name}_cluster_low": t_ci["low"],
                f"{metric.name}_cluster_high": t_ci["high"], f"{metric.name}_clusters": found_se.n_clusters}
    return out


NEAR_BOUND, FEW_ITEMS = 0.1, 100   # where Wilson's interval is shown beside the protocol's


def near_bound_metrics(found: joint_stats.Joint) -> list[str]:
    """Headline metrics bounded in [0, 1] on which some model scores within 0.1 of 0 or 1, or
    counts fewer than 100 items: there the percentile interval loses coverage (it misses on the
    inner side, or has no width), so Wilson's interval goes beside it."""
    out = []
    for metric in found.metrics:
        forms = [found.forms[(label, metric.name)] for label in found.labels]
        values = [f.value() for f in forms]
        if all(bounded.is_bounded(f.terms) for f in forms) and any(
                v is not None and (min(v, 1 - v) < NEAR_BOUND or int(f.used().sum()) < FEW_ITEMS)
                for f, v in zip(forms, values)):
            out.append(metric.name)
    return out


def bounded_columns(found: joint_stats.Joint, model: str, names: Sequence[str]) -> dict[str, Any]:
    """Wilson's interval on the effective number of items (:mod:`evalnb.stats.bounded`) of each
    metric in ``names``, beside the protocol's."""
    out: dict[str, Any] = {}
    for name in names:
        form = found.forms[(model, name)]
        se = clustered.uncertainty(form, found.design)
        ci = bounded.bounded_interval(form.value(), se.n, se.se, se.clustered_se, se.n_clusters) or {}
        out |= {f"{name}_wilson": form.value(), f"{name}_wilson_low": ci.get("low"), f"{name}_wilson_high": ci.get("high")}
    return out


def leaderboard_layout(bench: type[Benchmark], columns: Sequence[str]) -> Layout:
    """The leaderboard as shown: each model, then each headline metric's estimate and n and,
    where the comparison has clusters, its cluster interval beside it (and Wilson's near a
    bound). The other metrics, and every raw number, are in compare.json and leaderboard.csv."""
    words = {m.name: m.label.split(":")[0] for m in bench.metrics() if m.headline}
    shown = {name: f"{word} {CI}" for name, word in words.items()}
    kept = ("model", "run", "rank_interval", "p_first", "rank_note", "note")   # how sure the order is, where the joint bootstrap ran
    others = [c for c in columns if c not in kept and not any(c == m or c.startswith(f"{m}_") for m in shown)]
    layout = estimates_layout(shown, n={m: f"{m}_n" for m in shown}, hidden=others + [f"{m}_clusters" for m in shown])
    beside = tuple(Estimate(f"{word}: {CLUSTER_CI}", f"{m}_cluster", f"{m}_cluster_low", f"{m}_cluster_high")
                   for m, word in words.items() if f"{m}_cluster" in columns) + tuple(
        Estimate(f"{word}: {WILSON_CI}", f"{m}_wilson", f"{m}_wilson_low", f"{m}_wilson_high")
        for m, word in words.items() if f"{m}_wilson" in columns)
    return replace(layout, estimates=layout.estimates + beside)


def repeats_table(cmp: Comparison) -> pd.DataFrame:
    """Each headline metric's mean and s.d. across repeats, for runs that have them."""
    rows = []
    for run in cmp.runs:
        results = run.results(cmp.benchmark)
        if results.repeats < 2:
            continue
        for metric in headline_metrics(cmp):
            rows.append({"model": run.label, "number": metric.name,
                         **stats.mean_sd(stats.per_repeat(metric, results.values, _strata(results),
                                                                    results.channels))})
    table = pd.DataFrame(rows, columns=["model", "number", "mean", "sd", "n"])
    cmp.tables["repeats"] = table
    return readable(table, Layout(empty="No run has repeats (each item answered once)."))


def ranked(cmp: Comparison) -> pd.DataFrame:
    """The leaderboard, computed once."""
    return cmp.tables["leaderboard"] if "leaderboard" in cmp.tables else leaderboard(cmp)


def leaderboard_figure(cmp: Comparison) -> ReportFigure:
    """Each headline metric per model with its interval: one column wide for one metric, two for
    more; every value written beside its bar (a 0 drawn as a line at 0 and labelled); offline
    approximations grey and hatched; the bootstrap settings in the caption, not the figure."""
    from evalnb.views.figures import (OFFLINE, OFFLINE_NOTE, ONE_COLUMN, PALETTE, TWO_COLUMNS, figure_style,
                                     new_figure, save_figure, value_labels)

    table = ranked(cmp)
    metrics = headline_metrics(cmp)
    offline = list(table["offline"])[::-1]
    clustered_here = any(f"{m.name}_cluster_low" in table for m in metrics)
    caption = (f"{cmp.name}: " + "; ".join(m.label for m in metrics) + f". Bars: the value on the items each model "
               f"was scored on; lines: 95% percentile bootstrap intervals ({cmp.n_boot} resamples, seed {cmp.seed})."
               + (f" Under each model: its 95% rank interval on {metrics[0].name} and its probability of ranking "
                  "first, from one joint cluster bootstrap." if "rank_interval" in table else "")
               + (f" Dark ticks below each bar: the cluster 95% interval resampling {joint(cmp).cluster_noun}s "
                  "(clustered standard error, Student t), beside the protocol's." if clustered_here else "")
               + (f" {OFFLINE_NOTE}" if any(offline) else ""))
    names = list(table.index)
    if "rank_interval" in table:   # how sure each place is (rank interval, P(first): the joint cluster bootstrap)
        names = [f"{m}\nrank {r}" + (f", P(first) {p:.2f}" if pd.notna(p) else "")
                 for m, r, p in zip(names, table["rank_interval"], table["p_first"])]
    with figure_style():
        fig = new_figure((ONE_COLUMN if len(metrics) == 1 else TWO_COLUMNS, 0.3 * len(table) + 0.9), caption=caption)
        axes = fig.subplots(1, len(metrics), squeeze=False, sharey=True)
        for ax, metric in zip(axes[0], metrics):
            values = [float(v) for v in table[metric.name]][::-1]
            lows = [float(v) for v in table[f"{metric.name}_ci_low"]][::-1]
            highs = [float(v) for v in table[f"{metric.name}_ci_high"]][::-1]
            bars = ax.barh(names[::-1], values, height=0.6,
                           xerr=[[v - lo for v, lo in zip(values, lows)], [h - v for v, h in zip(values, highs)]],
                           capsize=2, error_kw={"elinewidth": 0.8})
            for bar, off in zip(bars, offline):
                bar.set(**(OFFLINE if off else {"color": PALETTE[0]}))
            if f"{metric.name}_cluster_low" in table:   # the cluster interval, just below the protocol's
                cluster_bars(ax, values, table[f"{metric.name}_cluster_low"], table[f"{metric.name}_cluster_high"])
            value_labels(ax, bars, values, highs, horizontal=True)
            ax.set_xlim(0, 1.15)
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1])
            ax.set_xlabel(metric.label.split(":")[0])
        return save_figure(fig, cmp.out / "figures", "leaderboard")


def cluster_bars(ax: Any, values: Sequence[float], lows: pd.Series, highs: pd.Series) -> None:
    """The cluster interval of each bar (bottom-up, as the bars), a thin dark line just under the
    protocol's; none where it is undefined."""
    for y, (v, lo, hi) in enumerate(zip(values, list(lows)[::-1], list(highs)[::-1])):
        if pd.notna(lo) and pd.notna(hi):
            ax.errorbar([v], [y - 0.2], xerr=[[v - float(lo)], [float(hi) - v]], fmt="none", ecolor="0.15",
                        elinewidth=0.8, capsize=1.5)


def _unnamed_index(table: pd.DataFrame) -> bool:
    return isinstance(table.index, pd.RangeIndex) and table.index.name is None


@dataclass(frozen=True)
class Saved:
    """What :func:`save_compare` wrote; shown in the notebook by file name, never by the
    machine's absolute path (the record goes into a paper)."""

    folder: Path
    files: tuple[str, ...]

    def __fspath__(self) -> str:   # os.fspath(saved) is compare.json, as the function returned before
        return str(self.folder / "compare.json")

    def __repr__(self) -> str:
        return f"Saved beside this record: {', '.join(self.files)}"

    def _repr_html_(self) -> str:   # a note about the record (the paper render keeps it, never as a result)
        return '<p class="evalnb-note">Saved beside this record: ' + ", ".join(f"<code>{f}</code>" for f in self.files) + "</p>"


def save_compare(cmp: Comparison) -> Saved:
    """Every table computed so far, with what was compared, as compare.json and CSV files
    (raw numbers, named columns: a table without a named index is written without one)."""
    cmp.out.mkdir(parents=True, exist_ok=True)
    for name, table in cmp.tables.items():
        table.to_csv(cmp.out / f"{name}.csv", index=not _unnamed_index(table))
    write_json(cmp.out / "compare.json", {
        "benchmark": cmp.name, "runs": [{"dir": str(r.dir), "label": r.label, "fingerprint": r.fingerprint.get("sha256"),
                                         "offline": r.offline} for r in cmp.runs],
        **({"suite": cmp.suite} if cmp.suite else {}),
        **({"panel_b": [{"dir": str(r.dir), "label": r.label, "fingerprint": r.fingerprint.get("sha256")}
                        for r in cmp.panel_b]} if cmp.panel_b else {}),
        "comparable_parts": list(comparable_parts(cmp.benchmark.COMPARABLE_PARTS)), "n_boot": cmp.n_boot, "seed": cmp.seed,
        "threshold": cmp.threshold,
        "tables": {name: json.loads(table.reset_index(drop=_unnamed_index(table)).to_json(orient="records")) for name, table in cmp.tables.items()}})
    return Saved(cmp.out, ("compare.json", *(f"{name}.csv" for name in cmp.tables)))
