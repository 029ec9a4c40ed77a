"""The tables a paper takes, as LaTeX, Markdown or CSV: ``evalnb export`` and ``render``'s ``paper/``.

From a run folder: the headline table, and the agreement between its judges (or rater runs)
when it has two or more. From a compare folder (a suite's leaderboard too): the leaderboard,
the pairwise verdicts, the paired differences on the common items (a sensitivity
view) and the judge agreement. Each table is read back from the record
(``scores.json``, ``compare.json``), never recomputed, and shown in the one table style
(:mod:`evalnb.views.tables`): LaTeX through pandas' Styler as a booktabs table, one
``\\begin{table}`` each with its caption and a label (``tab:evalnb-NAME``); Markdown as a
pipe table under its caption; CSV with the raw numbers (named columns, no integer index).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evalnb.core.errors import ConfigError
from evalnb.records.stores import read_json_if_exists, write_text
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

    def view(self, decimals: int | None = None) -> View:
        return paper_view(self.frame, self.layout, decimals)


def run_tables(folder: Path, scores: dict[str, Any]) -> list[PaperTable]:
    from evalnb.benchmarks import benchmark_for
    from evalnb.comparison.agreement import agreement_layout, pairwise
    from evalnb.evidence.headline import headline_table

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
                              leaderboard_layout(bench, list(board.columns))))
    if tables.get("pairwise"):   # one verdict per pair and headline metric, corrected for the pairs
        pairs = pd.DataFrame(tables["pairwise"])
        first = pairs.iloc[0]
        out.append(PaperTable(
            "pairwise", f"Pairwise verdicts per headline metric: the difference A minus B with its paired bootstrap "
            f"interval resampling {first.get('cluster') or 'item'}s ({compared['n_boot']} resamples, seed "
            f"{compared['seed']}), its clustered standard error, the correlation of the two models' item scores, "
            f"the two-sided p-value (paired cluster bootstrap: docs/statistics.md), the p-value adjusted by Holm's "
            f"method over every pair of the leaderboard, the verdict at alpha = {first.get('alpha', 0.05)}, and the "
            f"minimum detectable difference at {float(first.get('power', 0.8)):.0%} power.", pairs,
            pairwise_layout(power_of(pairs))))
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


_LATEX_SPECIAL = re.compile(r"([&%$#_{}])")


def _latex_text(text: str) -> str:
    text = text.replace("\\", r"\textbackslash{}").replace("~", r"\textasciitilde{}").replace("^", r"\^{}")
    return _LATEX_SPECIAL.sub(r"\\\1", text).replace("|", r"\textbar{}").replace("<", r"\textless{}") \
        .replace(">", r"\textgreater{}")


def latex(table: PaperTable, decimals: int | None = None) -> str:
    """One booktabs table (pandas' Styler): caption, label, text left and numbers right."""
    view = table.view(decimals)
    frame = view.frame
    if not len(frame.columns):
        return ""
    escaped = pd.DataFrame([[_latex_text(v) for v in row] for row in frame.itertuples(index=False)],
                           columns=[_latex_text(str(c)) for c in frame.columns])
    styler = escaped.style.hide(axis="index")
    return styler.to_latex(hrules=True, caption=_latex_text(table.caption), label=f"tab:evalnb-{table.name}",
                           position="htbp", position_float="centering",
                           column_format="".join("r" if n else "l" for n in view.numeric))


def markdown(table: PaperTable, decimals: int | None = None) -> str:
    return f"**Table ({table.name}).** {table.caption}\n\n{view_markdown(table.view(decimals))}\n"


def csv(table: PaperTable) -> str:
    frame = table.frame
    plain = isinstance(frame.index, pd.RangeIndex) and frame.index.name is None
    buffer = io.StringIO()
    frame.to_csv(buffer, index=not plain)
    return buffer.getvalue()


def document(tables: list[PaperTable], fmt: str, decimals: int | None = None) -> str:
    """Every table in one LaTeX or Markdown text (``decimals``: at least this many, default 3);
    CSV texts (raw numbers) with a ``# table: NAME`` line before each."""
    if fmt == "latex":
        return "% evalnb export: booktabs tables (\\usepackage{booktabs})\n\n" + "\n".join(
            latex(t, decimals) for t in tables)
    if fmt == "markdown":
        return "\n".join(markdown(t, decimals) for t in tables)
    return "\n".join(f"# table: {t.name}\n{csv(t)}" for t in tables)


def export(folder: Path, fmt: str, out: Path | None, decimals: int | None = None) -> list[Path]:
    """``evalnb export``: the folder's tables in ``fmt`` to ``out`` (a file; for CSV a folder of
    one file per table), or to standard output (returns no path)."""
    if fmt not in FORMATS:
        raise ConfigError(f"export: --format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    tables = paper_tables(folder)
    if out is None:
        print(document(tables, fmt, decimals), end="")
        return []
    if fmt == "csv":
        written = []
        for t in tables:
            write_text(out / f"{t.name}.csv", csv(t))
            written.append(out / f"{t.name}.csv")
        return written
    write_text(out, document(tables, fmt, decimals))
    return [out]


def write_paper_tables(folder: Path, paper: Path) -> list[Path]:
    """``render``: ``paper/tables.tex``, ``paper/tables.md`` and ``paper/NAME.csv``."""
    try:
        tables = paper_tables(folder)
    except ConfigError:
        return []   # a folder of executed notebooks without scores (nothing to tabulate)
    written = [paper / "tables.tex", paper / "tables.md"]
    write_text(written[0], document(tables, "latex"))
    write_text(written[1], document(tables, "markdown"))
    for t in tables:
        write_text(paper / f"{t.name}.csv", csv(t))
        written.append(paper / f"{t.name}.csv")
    return written
