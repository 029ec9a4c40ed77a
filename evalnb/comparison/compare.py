"""Comparing finished runs of one benchmark: a leaderboard with bootstrap intervals. The
pairwise verdicts are in :mod:`evalnb.pages.statistics`, the paired differences on the common
items (a sensitivity view) in :mod:`evalnb.comparison.paired`.

Runs are compared only when the fingerprint parts that make scores comparable agree (the
benchmark's ``COMPARABLE_PARTS``: prompts, the caps table, the judge panel, the
aggregation and retry policies, the task set; and the shared part, read key by key);
otherwise the comparison is refused, naming each thing once. Each model keeps its own cap
and decoding settings.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from evalnb.stats import intervals as stats
from evalnb.benchmarks import Benchmark, benchmark_for
from evalnb.benchmarks.base import contestant_label
from evalnb.core.types import ItemResults, Metric
from evalnb.core.errors import ConfigError, FingerprintMismatch
from evalnb.records.fingerprint import change_lines, comparable_parts, differing, moved_to_shared
from evalnb.records.stores import read_json_if_exists, write_json
from evalnb.stats.metric_n import items_read
from evalnb.views.tables import Layout, estimates_layout, readable
from evalnb.evidence.failures import DEFAULT_MAX_FAILED, did_not_run, failed_items, incomplete_cause
from evalnb.comparison import joint as joint_stats

if TYPE_CHECKING:
    from evalnb.views.figures import ReportFigure

OFFLINE_MARK = " [offline]"


@dataclass
class RunRecord:
    dir: Path
    scores: dict[str, Any]
    fingerprint: dict[str, Any]
    manifest: dict[str, Any]
    label: str = ""
    _results: ItemResults | None = field(default=None, repr=False)

    @property
    def offline(self) -> bool:
        return bool(self.scores.get("offline"))

    @property
    def model(self) -> str:
        config = self.scores["config"]
        model = config["model"]
        if model["provider"] != "none":
            return model["name"]
        return contestant_label(benchmark_for(self.scores["benchmark"], "compare"), "none", model["name"], config)

    def results(self, bench: type[Benchmark]) -> ItemResults:
        """The run's items as its benchmark reads them from scores.json (read once)."""
        if self._results is None:
            self._results = bench.results(self.scores)
        return self._results


@dataclass
class Comparison:
    runs: list[RunRecord]
    benchmark: type[Benchmark]
    out: Path
    n_boot: int = stats.N_BOOT
    seed: int = 0
    threshold: float = 0.2          # judges "disagree" when their scores differ by more
    top: int = 10                   # how many largest disagreements / most-missed items to list
    tables: dict[str, Any] = field(default_factory=dict)
    suite: dict[str, Any] | None = None   # a suite's leaderboard: its name, provisional, missing contestants
    alpha: float = 0.05             # the level of the pairwise verdicts (after Holm)
    power: float = 0.8              # the power of the minimum detectable differences
    _joint: joint_stats.Joint | None = field(default=None, repr=False)
    panel_b: list[RunRecord] | None = None   # compare --panels: the same contestants under a second panel (panel_change)
    record_dir: Path | None = None   # where the record lives (paths shown relative to it); default: out

    @property
    def home(self) -> Path:
        return self.record_dir or self.out

    @property
    def name(self) -> str:
        return self.runs[0].scores["benchmark"]


def load_run(path: Path) -> RunRecord:
    scores = read_json_if_exists(path / "scores.json")
    if scores is None:
        raise ConfigError(f"{path}: no scores.json; run the aggregate stage first")
    if not scores["complete"]:
        raise ConfigError(f"{path}: the run is incomplete (resumable work remains: {incomplete_cause(path)}); "
                          "finish it first")
    return RunRecord(path, scores, read_json_if_exists(path / "fingerprint.json") or {},
                     read_json_if_exists(path / "manifest.json") or {})


def check_comparable(runs: Sequence[RunRecord], parts: Sequence[str], moved: Sequence[str] = ()) -> None:
    """Refuse, naming the run and each thing, when any comparable part differs from the first
    run (``shared`` stands for its keys: :func:`evalnb.records.fingerprint.differing`)."""
    first = runs[0]
    for other in runs[1:]:
        differ = differing(first.fingerprint, other.fingerprint, parts, moved)
        if differ:
            detail = "\n".join(f"  {line}" for line in change_lines(first.fingerprint, other.fingerprint,
                                                                     parts=differ, moved=moved))
            raise FingerprintMismatch(f"refusing to compare {first.dir} with {other.dir}: {', '.join(differ)} "
                                      f"differ (first -> second):\n{detail}\nThe protocol forbids mixing such scores.")


def open_compare(runs: Sequence[str | Path] | str | Path | Mapping[str, Any] = (), out: str | Path | None = None, *,
                 n_boot: int = stats.N_BOOT, seed: int = 0, threshold: float = 0.2, top: int = 10,
                 suite: Mapping[str, Any] | None = None, alpha: float = 0.05, power: float = 0.8,
                 panels: Sequence[Sequence[str | Path]] | None = None,
                 max_failed: float = DEFAULT_MAX_FAILED, record_dir: str | Path | None = None) -> Comparison:
    """Load and check the runs to compare.

    ``runs`` is a list of run directories; or the compare options as one dictionary (what
    ``evalnb compare`` injects into the notebook); or a compare parameters file
    (``params/compare_example.yaml``), whose relative paths are relative to the file.
    ``panels``: instead of ``runs``, two lists of runs, the same contestants scored by two
    panels (:mod:`evalnb.judges.panel_change`): the first list is the comparison, the second
    is shown only beside it, never in its leaderboard.
    A run that did not run (all, or more than ``max_failed`` of its items failed) is refused
    (:func:`evalnb.evidence.failures.did_not_run`).
    ``record_dir``: where the record lives when it is not ``out`` (``evalnb verify`` recomputes
    into a scratch folder): the paths a table shows are relative to it.
    """
    if isinstance(runs, (str, Path)):
        return open_compare(compare_params(Path(runs)))
    if isinstance(runs, Mapping):
        return open_compare(**runs)
    for key, value in (("alpha", alpha), ("power", power)):   # the pairwise verdicts' level and the MDE's power
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise ConfigError(f"compare: {key}: expected a number strictly between 0 and 1, got {value!r}")
    if panels:
        if runs or len(panels) != 2:
            raise ConfigError("compare: panels: give two lists of runs (and no other runs): the same contestants "
                              "scored by two panels")
        runs = panels[0]
    if len(runs) < (1 if suite or panels else 2):   # a suite's provisional leaderboard, or one model's panel change
        raise ConfigError("compare: give at least two run directories")
    records, bench = comparable_runs(runs, max_failed)
    if suite:   # shown in the notebook, above the leaderboard
        print(suite_banner(suite))
    cmp = Comparison(records, bench, Path(out or "outputs/compare").resolve(), n_boot, seed, threshold, top,
                     suite=dict(suite) if suite else None, alpha=alpha, power=power,
                     record_dir=Path(record_dir).resolve() if record_dir else None)
    if panels:
        cmp.panel_b, other = comparable_runs(panels[1], max_failed)
        if other is not bench:
            raise ConfigError("compare: panels: the two panels scored runs of different benchmarks")
        check_comparable([records[0], cmp.panel_b[0]], ("tasks",), moved_to_shared(bench))   # the same items, whatever scored them
    return cmp


def comparable_runs(runs: Sequence[str | Path], max_failed: float = DEFAULT_MAX_FAILED
                    ) -> tuple[list[RunRecord], type[Benchmark]]:
    """The runs loaded, checked to have run (reading 30) and comparable, and labelled; their benchmark."""
    dirs = [Path(r).resolve() for r in runs]
    if twice := sorted({str(d) for d in dirs if dirs.count(d) > 1}):   # a paired difference of 0 by construction
        raise ConfigError(f"compare: {twice[0]} is given twice; a run compared with itself says nothing: give different runs")
    records = [load_run(d) for d in dirs]
    # Each run's benchmark as its parameters named it (a built-in name, an import path or an
    # entry point): two names for one class are one benchmark.
    classes = {name: benchmark_for(name, "compare") for name in {r.scores["benchmark"] for r in records}}
    if len(set(classes.values())) > 1:
        raise ConfigError(f"compare: runs of different benchmarks ({', '.join(sorted(classes))})")
    bench = next(iter(classes.values()))
    for record in records:
        if refusal := did_not_run(record.dir, record.results(bench).statuses, max_failed):
            raise ConfigError(refusal)
    check_comparable(records, (*comparable_parts(bench.COMPARABLE_PARTS), "subset"),   # a --limit run never against a full one
                     moved_to_shared(bench))
    models = [r.model for r in records]
    labels: list[str] = []
    for i, r in enumerate(records):   # a model run twice is told apart by its run directory
        label = r.model if models.count(r.model) == 1 else f"{r.model} ({r.dir.name})"
        labels.append(label if label not in labels else f"{label} #{i + 1}")
        r.label = labels[-1] + (OFFLINE_MARK if r.offline else "")
    return records, bench


def suite_banner(suite: Mapping[str, Any]) -> str:
    """What a suite's leaderboard says it is: final, or provisional with what is missing."""
    if not suite.get("provisional"):
        return f"Leaderboard of suite {suite['name']}: every contestant complete ({len(suite['complete'])})."
    return (f"PROVISIONAL leaderboard of suite {suite['name']}: {len(suite['complete'])} of "
            f"{len(suite['complete']) + len(suite['missing'])} contestants complete; missing: "
            f"{', '.join(suite['missing'])}. Run the suite again to finish them.")


def compare_params(path: Path) -> dict[str, Any]:
    """A compare parameters file (``runs``, ``out``, options), its paths made absolute."""
    from evalnb.config import read_params_file

    path = path.expanduser().resolve()
    config = read_params_file(path)
    config["runs"] = [str((path.parent / r).resolve()) for r in config.get("runs") or []]
    if config.get("panels"):
        config["panels"] = [[str((path.parent / r).resolve()) for r in side] for side in config["panels"]]
    config["out"] = str((path.parent / (config.get("out") or "outputs/compare")).resolve())   # as `evalnb compare --params`
    return config


# --- leaderboard ----------------------------------------------------------------------------------

def _strata(results: ItemResults, ids: Sequence[str] | None = None) -> list[str]:
    return [results.strata.get(i, "") for i in (results.ids if ids is None else ids)]


def intervals(cmp: Comparison, run: RunRecord) -> dict[str, stats.Interval]:
    """Every metric the benchmark declares, with the compare's bootstrap settings."""
    results = run.results(cmp.benchmark)
    return stats.metric_intervals(results.values, cmp.benchmark.metrics(), strata=_strata(results),
                                  n_boot=cmp.n_boot, seed=cmp.seed, channels=results.channels)


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
    metrics = {m.name: m for m in cmp.benchmark.metrics()}
    for run in cmp.runs:
        results = run.results(cmp.benchmark)
        row: dict[str, Any] = {"model": run.label, "run": run.scores["run_name"], "offline": run.offline,
                               "n": len(results.ids), "failed": failed_items(results.statuses)}
        for name, interval in intervals(cmp, run).items():
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
    table = pd.DataFrame(rows).sort_values(first, ascending=False).set_index("model")
    cmp.tables["leaderboard"] = table
    return readable(table, leaderboard_layout(cmp.benchmark, list(table.columns)))


def leaderboard_layout(bench: type[Benchmark], columns: Sequence[str]) -> Layout:
    """The leaderboard as shown: each model, then each headline metric's estimate and n. The
    other metrics, and every raw number, are in compare.json and leaderboard.csv."""
    shown = {m.name: m.label.split(":")[0] for m in bench.metrics() if m.headline}
    kept = ("model", "run", "rank_interval", "p_first")   # how sure the order is, where the joint bootstrap ran
    others = [c for c in columns if c not in kept and not any(c == m or c.startswith(f"{m}_") for m in shown)]
    return estimates_layout(shown, n={m: f"{m}_n" for m in shown}, hidden=others,
                            rename={"rank_interval": "rank (95% interval)", "p_first": "P(first)"})


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
    caption = (f"{cmp.name}: " + "; ".join(m.label for m in metrics) + f". Bars: the value on the items each model "
               f"was scored on; lines: 95% percentile bootstrap intervals ({cmp.n_boot} resamples, seed {cmp.seed})."
               + (f" Under each model: its 95% rank interval on {metrics[0].name} and its probability of ranking "
                  "first, from one joint cluster bootstrap." if "rank_interval" in table else "")
               + (f" {OFFLINE_NOTE}" if any(offline) else ""))
    names = list(table.index)
    if "rank_interval" in table:   # how sure each place is (rank interval, P(first): the joint cluster bootstrap)
        names = [f"{m}\nrank {r}, P(first) {p:.2f}" for m, r, p in zip(names, table["rank_interval"], table["p_first"])]
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
            value_labels(ax, bars, values, highs, horizontal=True)
            ax.set_xlim(0, 1.15)
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1])
            ax.set_xlabel(metric.label.split(":")[0])
        return save_figure(fig, cmp.out / "figures", "leaderboard")


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
