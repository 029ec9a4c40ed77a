"""Opening a comparison of finished runs of one benchmark and checking that they may be compared.
What is computed over an open comparison lives beside it: the leaderboard and ``compare.json`` in
:mod:`evalnb.comparison.leaderboard`, the paired differences on the common items (a sensitivity
view) in :mod:`evalnb.comparison.paired`, the pairwise verdicts' page in :mod:`evalnb.pages.statistics`.

Runs are compared only when the fingerprint parts that make scores comparable agree (the
benchmark's ``COMPARABLE_PARTS``: prompts, the caps table, the judge panel, the
aggregation and retry policies, the task set; and the shared part, read key by key);
otherwise the comparison is refused, naming each thing once. Each model keeps its own cap
and decoding settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any


from evalnb.stats import intervals as stats
from evalnb.benchmarks import Benchmark, benchmark_for
from evalnb.benchmarks.base import contestant_label
from evalnb.core.types import ItemResults
from evalnb.core.errors import ConfigError, FingerprintMismatch
from evalnb.records.fingerprint import change_lines, comparable_parts, differing, moved_to_shared
from evalnb.records.stores import read_json_if_exists
from evalnb.evidence.failures import DEFAULT_MAX_FAILED, did_not_run, incomplete_cause
from evalnb.comparison import joint as joint_stats

if TYPE_CHECKING:
    pass

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
    """The runs loaded, checked to have run and comparable, and labelled; their benchmark."""
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
