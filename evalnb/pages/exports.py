"""The tables a paper takes, as LaTeX, Markdown or CSV: ``evalnb export`` and ``render``'s ``paper/``.

From a run folder: the headline table, and the agreement between its judges (or rater runs)
when it has two or more. From a compare folder (a suite's leaderboard too): the leaderboard,
the pairwise verdicts, the paired differences on the common items (a sensitivity
view) and the judge agreement. Each table is read back from the record
(``scores.json``, ``compare.json``), never recomputed, and shown in the one table style
(:mod:`evalnb.views.tables`) under the one vocabulary (:mod:`evalnb.views.labels`): LaTeX as a
booktabs table fitted to the page (:mod:`evalnb.pages.latex`), one ``\\begin{table}`` each
with its caption and a label (``tab:evalnb-NAME``); Markdown as a pipe table under its
caption; CSV with the raw numbers (named columns, no integer index) and ``columns.csv``, the
data dictionary saying what each machine column means.

A paper's table shows a short default selection of columns (the pairwise verdicts leave out
SE, rho and the unadjusted p, which the notebook and the CSV keep); ``--columns all`` shows
every column the notebook shows, ``--columns a,b`` the named ones.
"""

from __future__ import annotations

import dataclasses
import io
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evalnb.core.errors import ConfigError
from evalnb.records.stores import read_json_if_exists, write_text
from evalnb.pages.judge_exports import JUDGE_HIDDEN, judge_tables, run_judge_tables
from evalnb.pages.latex import FITS, PACKAGES, figures_latex, png_caption, table_latex
from evalnb.views.labels import data_dictionary, header, metric_words
from evalnb.views.pairwise import pairwise_layout, power_of
from evalnb.views.tables import Layout, View, layout_of, paper_view, view_markdown
from evalnb.views.words import plural

FORMATS = ("latex", "markdown", "csv")
SUFFIX = {"latex": "tex", "markdown": "md"}


@dataclass(frozen=True)
class PaperTable:
    name: str            # file stem and label: tab:evalnb-NAME
    caption: str
    frame: pd.DataFrame  # the raw numbers
    layout: Layout
    short: tuple[str, ...] = ()   # columns a paper's table leaves out by default (--columns all: shown)

    def view(self, decimals: int | None = None, columns: Sequence[str] | None = None) -> View:
        return paper_view(self.frame, self.chosen(columns), decimals)

    def chosen(self, columns: Sequence[str] | None = None) -> Layout:
        """The layout with the columns ``columns`` picks (machine names or headers; None: the
        table's short default; ``["all"]``: every column the notebook shows)."""
        if columns is None:
            return dataclasses.replace(self.layout, hidden=(*self.layout.hidden, *self.short))
        if list(columns) == ["all"]:
            return self.layout
        keep = {c for c in self.frame.columns if c in columns or header(c) in columns}
        estimates = tuple(e for e in self.layout.estimates if e.value in keep)
        hidden = tuple(c for c in self.frame.columns if c not in keep)
        return dataclasses.replace(self.layout, estimates=estimates, hidden=(*self.layout.hidden, *hidden))


def run_tables(folder: Path, scores: dict[str, Any]) -> list[PaperTable]:
    from evalnb.benchmarks import benchmark_for
    from evalnb.comparison.agreement import agreement_layout, pairwise
    from evalnb.evidence.headline import headline_table
    from evalnb.pages.statistics import uncertainty_layout, uncertainty_rows

    headline = headline_table(scores)
    name = scores.get("run_name", folder.name)
    tables = [PaperTable("headline", f"{scores['benchmark']} run {name}: every declared metric with its 95% "
                         f"percentile bootstrap interval and the number of items it rests on.{_offline(scores)}",
                         pd.DataFrame(headline), layout_of(headline))]
    results = benchmark_for(scores["benchmark"], "export").results(scores)
    wide = pd.DataFrame(results.judges).T
    if wide.shape[1] >= 2:
        rows = pairwise(wide.reindex(sorted(wide.columns), axis=1), 0.2)
        tables.append(PaperTable("judge_agreement", f"Agreement between the judges (or rater runs) of run {name}, "
                                 "over the items both scored.", pd.DataFrame(rows), agreement_layout(0.2)))
    if rows := uncertainty_rows(scores):   # the report's standard-errors table, clusters beside the protocol
        tables.append(PaperTable("standard_errors", f"Standard errors of run {name}: each metric's protocol interval "
                                 "and n, its standard error, the clustered standard error, the design effect, and the "
                                 "intervals that know the clusters (the cluster bootstrap, the clustered SE with "
                                 "Student t) or the bounds (Wilson's).", pd.DataFrame(rows),
                                 uncertainty_layout(benchmark_for(scores["benchmark"], "export"))))
    tables += [PaperTable(n, caption, frame, layout) for n, caption, frame, layout in run_judge_tables(folder)]
    return tables


def compare_tables(folder: Path, compared: dict[str, Any]) -> list[PaperTable]:
    from evalnb.benchmarks import benchmark_for
    from evalnb.comparison.agreement import agreement_layout
    from evalnb.comparison.leaderboard import leaderboard_layout
    from evalnb.comparison.paired import paired_layout

    bench = benchmark_for(compared["benchmark"], "export")
    tables = compared.get("tables") or {}
    settings = f"95% percentile bootstrap intervals ({compared['n_boot']} resamples, seed {compared['seed']})"
    offline = " Models marked [offline] are offline approximations, not comparable with the paper." if any(
        r.get("offline") for r in compared["runs"]) else ""
    out = []
    if "leaderboard" in tables:
        board = pd.DataFrame(tables["leaderboard"])
        labels = "; ".join(m.label for m in bench.metrics() if m.headline)
        out.append(PaperTable("leaderboard", f"{compared['benchmark']} leaderboard ({labels}), with {settings} and the "
                              f"number of items each estimate rests on.{offline}", board,
                              leaderboard_layout(bench, list(board.columns)), short=("run",)))
    if tables.get("pairwise"):   # one verdict per pair and headline metric, corrected for the pairs
        pairs = pd.DataFrame(tables["pairwise"])
        first = pairs.iloc[0]
        out.append(PaperTable(
            "pairwise", f"Pairwise verdicts per headline metric, each pair ordered as the leaderboard ranks it: the "
            f"difference A minus B with its paired bootstrap "
            f"interval resampling {first.get('cluster') or 'item'}s ({compared['n_boot']} resamples, seed "
            f"{compared['seed']}), its clustered standard error, the correlation of the two models' item scores, "
            f"the two-sided p-value (paired cluster bootstrap), the p-value adjusted by Holm's "
            f"method over every pair of the leaderboard, the verdict at alpha = {first.get('alpha', 0.05)}, and the "
            f"minimum detectable difference at {float(first.get('power', 0.8)):.0%} power.", pairs,
            pairwise_layout(power_of(pairs), metric_words(bench.metrics())), short=("se_delta", "rho", "p")))
    if "paired_differences" in tables:   # after the verdicts: a sensitivity view on the common items
        paired = pd.DataFrame(tables["paired_differences"])
        noun = str(paired["cluster"].iloc[0]) if "cluster" in paired and len(paired) else "cluster"
        resampled = (f"whole {plural(noun)} of those items, the number of common items (n) and of {plural(noun)} "
                     "among them" if "n_clusters" in paired else "items")   # a record written before clusters
        out.append(PaperTable(
            "paired_differences", "Sensitivity view, not a verdict: the mean difference of item scores (A minus B) on "
            f"the items both models attempted, with {settings} resampling {resampled}. It can differ from the "
            "pairwise verdicts, which compare each model's headline metric over the full task set.", paired,
            paired_layout(noun)))
    if "judge_agreement" in tables and tables["judge_agreement"]:
        out.append(PaperTable("judge_agreement", "Agreement between the judges (or rater runs) of each model, over the "
                              "items both scored.", pd.DataFrame(tables["judge_agreement"]),
                              agreement_layout(compared.get("threshold", 0.2))))
    for name, caption, frame, layout in judge_tables(compared):
        if name != "judge_agreement":
            out.append(PaperTable(name, caption, frame, layout, short=JUDGE_HIDDEN.get(name, ())))
    return out


def _offline(scores: dict[str, Any]) -> str:
    return " An offline approximation, not comparable with the paper." if scores.get("offline") else ""


def paper_tables(folder: Path) -> list[PaperTable]:
    """The tables of a run or compare folder (see the module); refuses any other folder."""
    folder = Path(folder)
    compared = read_json_if_exists(folder / "compare.json")
    if compared is not None:
        return compare_tables(folder, compared)
    scores = read_json_if_exists(folder / "scores.json")
    if scores is None:
        raise ConfigError(f"export: {folder}: neither a run (scores.json) nor a compare (compare.json) folder")
    return run_tables(folder, scores)


def latex(table: PaperTable, decimals: int | None = None, fit: str = "text",
          columns: Sequence[str] | None = None) -> str:
    """One booktabs table fitted as ``fit`` says (:mod:`evalnb.pages.latex`)."""
    return table_latex(table.view(decimals, columns), table.caption, f"tab:evalnb-{table.name}", fit)


def markdown(table: PaperTable, decimals: int | None = None, columns: Sequence[str] | None = None) -> str:
    from evalnb.views.labels import abbreviations

    view = table.view(decimals, columns)
    note = abbreviations([str(c) for c in view.frame.columns])
    return f"**Table ({table.name}).** {table.caption}{' ' + note if note else ''}\n\n{view_markdown(view)}\n"


def csv(table: PaperTable) -> str:
    frame = table.frame
    plain = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    buffer = io.StringIO()
    frame.to_csv(buffer, index=not plain)
    return buffer.getvalue()


def columns_csv(tables: list[PaperTable]) -> str:
    """The data dictionary beside the CSV files: each file's machine columns, the header every
    view shows for it, and what it means."""
    rows = [{"table": t.name, **row} for t in tables for row in data_dictionary(t.frame.columns)]
    buffer = io.StringIO()
    pd.DataFrame(rows, columns=["table", "column", "header", "meaning"]).to_csv(buffer, index=False)
    return buffer.getvalue()


def document(tables: list[PaperTable], fmt: str, decimals: int | None = None, fit: str = "text",
             columns: Sequence[str] | None = None) -> str:
    """Every table in one LaTeX or Markdown text (``decimals``: at least this many, default 3);
    CSV texts (raw numbers) with a ``# table: NAME`` line before each."""
    if fmt == "latex":
        return "% evalnb export: booktabs tables\n" + PACKAGES + "\n" + "\n".join(
            latex(t, decimals, fit, columns) for t in tables)
    if fmt == "markdown":
        return "\n".join(markdown(t, decimals, columns) for t in tables)
    return "\n".join(f"# table: {t.name}\n{csv(t)}" for t in tables)


def check_choice(tables: list[PaperTable], fit: str, columns: Sequence[str] | None) -> None:
    """Refuse a fit or a column no table has, naming what there is."""
    if fit not in FITS:
        raise ConfigError(f"export: --fit must be one of {', '.join(FITS)}, got {fit!r}")
    if columns is None or list(columns) == ["all"]:
        return
    known = {str(c) for t in tables for c in t.frame.columns} | {header(c) for t in tables for c in t.frame.columns}
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise ConfigError(f"export: --columns: no table has {', '.join(unknown)}; columns are "
                          f"{', '.join(sorted(known))} (or all)")


def export(folder: Path, fmt: str, out: Path | None, decimals: int | None = None, fit: str = "text",
           columns: Sequence[str] | None = None) -> list[Path]:
    """``evalnb export``: the folder's tables in ``fmt`` to ``out`` (a file; for CSV a folder of
    one file per table and ``columns.csv``), or to standard output (returns no path)."""
    if fmt not in FORMATS:
        raise ConfigError(f"export: --format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    tables = paper_tables(folder)
    check_choice(tables, fit, columns)
    if out is None:
        print(document(tables, fmt, decimals, fit, columns), end="")
        return []
    if fmt == "csv":
        written = []
        for t in tables:
            write_text(out / f"{t.name}.csv", csv(t))
            written.append(out / f"{t.name}.csv")
        write_text(out / "columns.csv", columns_csv(tables))
        return [*written, out / "columns.csv"]
    write_text(out, document(tables, fmt, decimals, fit, columns))
    return [out]


def write_paper_tables(folder: Path, paper: Path) -> list[Path]:
    """``render``: ``paper/tables.tex``, ``paper/tables.md`` and ``paper/NAME.csv``."""
    try:
        tables = paper_tables(folder)
    except ConfigError:
        return []   # a folder of executed notebooks without scores (nothing to tabulate)
    written = [paper / "tables.tex", paper / "tables-column.tex", paper / "tables.md", paper / "columns.csv"]
    write_text(written[0], document(tables, "latex"))
    write_text(written[1], document(tables, "latex", fit="column"))
    write_text(written[2], document(tables, "markdown"))
    write_text(written[3], columns_csv(tables))
    for t in tables:
        write_text(paper / f"{t.name}.csv", csv(t))
        written.append(paper / f"{t.name}.csv")
    return written + write_paper_figures(folder, paper)


def write_paper_figures(folder: Path, paper: Path) -> list[Path]:
    """``paper/figures/`` (a copy of the record's figures), ``paper/figures.tex`` (one figure
    environment each) and ``paper/captions.md`` (the captions as text)."""
    pngs = sorted((folder / "figures").glob("*.png"))
    names = [p.stem for p in pngs if p.with_suffix(".pdf").exists()]
    if not names:
        return []
    (paper / "figures").mkdir(parents=True, exist_ok=True)
    for name in names:
        for suffix in (".pdf", ".png"):
            shutil.copyfile(folder / "figures" / f"{name}{suffix}", paper / "figures" / f"{name}{suffix}")
    captions = [png_caption(folder / "figures" / f"{name}.png") for name in names]
    write_text(paper / "figures.tex", figures_latex(names, captions))
    write_text(paper / "captions.md", "\n".join(f"**Figure ({n}).** {c}\n" for n, c in zip(names, captions)))
    return [paper / "figures.tex", paper / "captions.md"]
