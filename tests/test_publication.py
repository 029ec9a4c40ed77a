"""Tables, figures and pages that go into a paper without editing, checked on the
session's one `evalnb demo` (tests/conftest.py::demo_outputs) and on small inputs."""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pandas as pd
import pytest

from evalnb.app.main import main
from tests.conftest import ROOT, DemoOutputs, figure_outputs

RUNS = ("demo-wildtrace", "demo-wildtrace-lead-3", "demo-geoktools", "demo-geoexpertqueries")
COMPARE = "demo-compare-wildtrace"
ESTIMATE = re.compile(r"^-?\d+\.\d{3,6} \[-?\d+\.\d{3,6}, -?\d+\.\d{3,6}\]$")
TABLE = re.compile(r'<table class="evalnb-table">(.*?)</table>', re.S)


def tables_in(page: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table drawn in the one table style: its header cells and its rows' cells."""
    out = []
    for body in TABLE.findall(page):
        head = [html.unescape(h) for h in re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", body, re.S)]
        rows = [[html.unescape(c) for c in re.findall(r"<td(?:\s[^>]*)?>(.*?)</td>", row, re.S)]
                for row in re.findall(r"<tr>(.*?)</tr>", body, re.S) if "<td" in row]
        out.append((head, rows))
    return out


def shown_html(notebook: Path) -> list[str]:
    nb = nbformat.read(notebook, as_version=4)
    return [o["data"]["text/html"] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
            if "text/html" in o.get("data", {})]


def machine_paths(text: str, demo: DemoOutputs) -> list[str]:
    text = re.sub(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+", "", text)
    return [p for p in (str(demo.dir), str(demo.dir.parent), str(ROOT), "/tmp/", "/home/") if p in text]


def check_table(head: list[str], rows: list[list[str]], where: str) -> None:
    """The one style: no boolean, no bare integer index, every estimate in value [low, high]
    form with its n beside it."""
    from evalnb.views.labels import snake_case

    cells = [c for row in rows for c in row]
    assert not {"True", "False"} & set(cells), where
    assert not any(snake_case(h) for h in head), (where, head)   # the vocabulary's headers, never a code name
    assert head and head[0] != "index", where
    assert not (head[0] == "" and [r[0] for r in rows] == [str(i) for i in range(len(rows))]), where   # 0, 1, ...
    for i in range(len(head)):
        values = [r[i] for r in rows if i < len(r)]
        if any(ESTIMATE.match(v) for v in values) and head[1:] == ["estimate"]:   # a measure / estimate list
            assert any(r[0].startswith("n") for r in rows), (where, rows)    # its n a row of its own
        elif any(ESTIMATE.match(v) for v in values):   # its n next to it: "n", or a count of clusters
            beside = [r[i + 1] for r in rows if i + 1 < len(r)]
            # (estimates side by side may share one n: the row's "n" column)
            assert "n" in head or (i + 1 < len(head) and all(re.fullmatch(r"\d+", v) for v in beside)), (where, head)
            assert all(ESTIMATE.match(v) or v == "-" or re.fullmatch(r"\d+", v) for v in values), (where, values)
    assert all(not re.fullmatch(r"-?\d+\.\d{4,}", c) for c in cells), (where, cells)   # no six decimals


def test_every_table_view_of_the_demo_is_in_the_one_style(demo_outputs: DemoOutputs) -> None:
    folders = [demo_outputs.dir / n for n in (*RUNS, COMPARE)]
    estimates = 0
    for folder in folders:
        for notebook in sorted(folder.glob("*.ipynb")):
            for page in shown_html(notebook):
                assert not machine_paths(page, demo_outputs) or "evalnb-about" in page, notebook
                for head, rows in tables_in(page):
                    check_table(head, rows, f"{notebook.name}: {head}")
                    estimates += any(ESTIMATE.match(c) for r in rows for c in r)
        for page in sorted((folder / "paper").glob("*.html")):   # the paper render draws the same tables
            for head, rows in tables_in(page.read_text("utf-8")):
                check_table(head, rows, f"{page}: {head}")
    assert estimates >= len(RUNS) + 2   # each headline table, the leaderboard, the paired differences
    report = shown_html(demo_outputs.dir / "demo-wildtrace" / "04_report.ipynb")
    # the headline table: the protocol's estimate and its n (then, where tasks share documents, the cluster interval)
    head, rows = next(t for p in report for t in tables_in(p) if t[0][:3] == ["metric", "estimate [95% CI]", "n"]
                      and any(r[0].startswith("Scored") for r in t[1]))
    by_metric = {r[0].split(":")[0]: r for r in rows}
    # Scored rests on the 10 tasks scored (scored_n), All on all 12 (it once said 12 for both).
    assert by_metric["Scored"][head.index("n")] == "10" and by_metric["All"][head.index("n")] == "12"
    assert by_metric["tasks scored"][head.index("estimate [95% CI]")] == "10"   # a count stays a count
    # The raw numbers stay in the CSV files, with named columns (no bare integer index).
    for name in ("paired_differences", "judge_agreement", "leaderboard"):
        frame = pd.read_csv(demo_outputs.dir / COMPARE / f"{name}.csv")
        assert not any(str(c).startswith("Unnamed") for c in frame.columns), name
    paired = pd.read_csv(demo_outputs.dir / COMPARE / "paired_differences.csv")
    assert list(paired.columns[:2]) == ["model_a", "model_b"] and paired["mean_diff"].dtype == float
    # the columns it always had, and the documents the common tasks fall in (the clusters resampled)
    assert {"n_common", "mean_diff", "ci_low", "ci_high", "note", "n_clusters"} <= set(paired.columns)
    assert (paired["n_clusters"] <= paired["n_common"]).all() and set(paired["cluster"]) == {"document"}


def test_exports_latex_markdown_and_csv(demo_outputs: DemoOutputs, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    compare = demo_outputs.dir / COMPARE
    assert main(["export", str(compare), "--format", "latex", "-o", str(tmp_path / "t.tex")]) == 0
    tex = (tmp_path / "t.tex").read_text()
    assert tex == (compare / "paper" / "tables.tex").read_text()   # render wrote the same into paper/
    blocks = re.findall(r"\\begin\{table\}\[htbp\](.*?)\\end\{table\}", tex, re.S)
    assert len(blocks) == tex.count("\\begin{table}") >= 4   # every view the compare shows
    labels = []
    for block in blocks:
        assert "\\caption{" in block and "\\toprule" in block and "\\midrule" in block and "\\bottomrule" in block
        labels += re.findall(r"\\label\{(tab:evalnb-[\w-]+)\}", block)
        spec = re.search(r"\\begin\{tabular\}\{([lr]+)\}", block)
        assert spec, block
        body = block.split("\\midrule")[1].split("\\bottomrule")[0]
        for line in [ln for ln in body.strip().splitlines() if ln.strip()]:
            assert len(re.split(r"(?<!\\)&", line)) == len(spec.group(1)), line
    # the verdicts first; the paired differences on the common items after them, a sensitivity view
    assert labels[:4] == ["tab:evalnb-leaderboard", "tab:evalnb-pairwise", "tab:evalnb-paired_differences",
                          "tab:evalnb-judge_agreement"]
    assert {"tab:evalnb-judge_reliability", "tab:evalnb-judge_means"} <= set(labels)
    assert "Sensitivity view, not a verdict" in blocks[2] and "resampling whole documents" in blocks[2]
    # the pairwise verdicts: each pair's difference and interval as compare.json holds them, its verdict
    from evalnb.views.estimates import estimate_text
    for pair in json.loads((compare / "compare.json").read_text())["tables"]["pairwise"]:
        assert estimate_text(pair["delta"], pair["ci_low"], pair["ci_high"]) in blocks[1]
        assert pair["verdict"].replace("_", "\\_") in blocks[1] and "Holm" in blocks[1]
    assert re.search(r"& 0\.551 \[0\.325, 0\.781\] & 12 &", tex)   # value [low, high], then n
    if shutil.which("pdflatex"):   # Debian's texlive-latex-base/-recommended (.ci/run installs them)
        (tmp_path / "paper.tex").write_text("\\documentclass{article}\\usepackage[T1]{fontenc}\\usepackage{booktabs,graphicx}"
                                            "\\begin{document}\\input{t.tex}\\end{document}\n")
        done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:]
        assert (tmp_path / "paper.pdf").stat().st_size > 1000

    assert main(["export", str(demo_outputs.dir / "demo-wildtrace"), "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    blocks = [[ln for ln in block.splitlines() if ln.startswith("|")] for block in markdown.split("\n\n")]
    blocks = [b for b in blocks if b]
    # the headline table, the agreement of the run's three judges, then the judges' own tables it recorded
    assert len(blocks) >= 2 and "**Table (judge_agreement).**" in markdown
    assert "**Table (judge_reliability).**" in markdown and "Krippendorff's alpha (interval)" in markdown
    # the report's standard-errors table, its metrics named by their words and the clusters' intervals beside
    errors = markdown.split("**Table (standard_errors).**")[1].split("\n\n")[1].splitlines()
    assert "clustered SE, t [95% CI]" in errors[0] and "documents" in errors[0]
    assert {row.split("|")[1].strip() for row in errors[2:]} >= {"All", "Scored"}
    for rows in blocks:   # every row as many cells as the header (an escaped \| is text)
        assert len({ln.count("|") - ln.count("\\|") for ln in rows}) == 1, rows
    assert "| All: mean over every task in the data file (not answered ok = 0) | 0.551 [0.325, 0.781] | 12 |" in markdown

    assert main(["export", str(compare), "--format", "csv", "-o", str(tmp_path / "csv")]) == 0
    board = pd.read_csv(tmp_path / "csv" / "leaderboard.csv")
    saved = json.loads((compare / "compare.json").read_text())["tables"]["leaderboard"]
    assert list(board["model"]) == [r["model"] for r in saved] and board["all_tasks"].tolist() == pytest.approx(
        [r["all_tasks"] for r in saved])   # raw numbers, not the shown text
    assert main(["export", str(tmp_path), "--format", "latex"]) == 1   # neither a run nor a compare
    assert main(["export", str(compare), "--format", "markdown", "--decimals", "2"]) == 0
    assert "| 0.55 [0.33, 0.78] | 12 |" in capsys.readouterr().out


def pdf_fonts(pdf: Path) -> list[str]:
    out = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True, timeout=60).stdout
    return [line for line in out.splitlines()[2:] if line.strip()]


def png_facts(png: Path) -> tuple[float, float, float]:
    """Width and height in inches at the PNG's own resolution, and that resolution in dpi."""
    data = png.read_bytes()
    width, height = struct.unpack(">II", data[16:24])
    at = data.index(b"pHYs")
    per_metre = struct.unpack(">I", data[at + 4:at + 8])[0]
    dpi = per_metre * 0.0254
    return width / dpi, height / dpi, dpi


@pytest.mark.skipif(not shutil.which("pdffonts"), reason="poppler-utils (pdffonts) is not installed")
def test_every_demo_figure_is_a_journals(demo_outputs: DemoOutputs) -> None:
    pdfs = sorted(demo_outputs.dir.glob("*/figures/*.pdf"))
    pngs = sorted(demo_outputs.dir.glob("*/figures/*.png"))
    assert len(pdfs) == len(pngs) == 10
    for pdf in pdfs:
        fonts = pdf_fonts(pdf)
        assert fonts and not any("Type 3" in f for f in fonts), (pdf, fonts)
        assert all("TrueType" in f for f in fonts), (pdf, fonts)
        assert b"/Subject" in pdf.read_bytes()   # the caption in the file's metadata
    for png in pngs:
        width, _, dpi = png_facts(png)
        assert round(dpi) == 300, png
        assert min(abs(width - 3.3), abs(width - 7.0)) < 0.02, (png, width)   # one column or two
        assert b"Description" in png.read_bytes()
    # No title or parameters inside a figure: they are in the caption written beside it.
    report = nbformat.read(demo_outputs.dir / "demo-geoktools" / "04_report.ipynb", as_version=4)
    figures = [o["data"]["text/html"] for o in figure_outputs(report)]
    assert len(figures) == 2 and all("<figcaption>" in f for f in figures)
    assert any("10000 resamples, seed 0" in f for f in figures)


def test_the_paper_render_leaks_nothing_of_the_machine(demo_outputs: DemoOutputs) -> None:
    pages = sorted(demo_outputs.dir.glob("*/paper/*.html"))
    assert {p.parent.parent.name for p in pages} == {"demo-wildtrace", COMPARE}
    for page in pages:
        text = page.read_text("utf-8")
        assert not machine_paths(text, demo_outputs), (page, machine_paths(text, demo_outputs))
        assert "PosixPath(" not in text, page
        assert text.count(">Provenance<") == 1, page   # once, and not again as each stage's table
        assert "evalnb-about" not in text, page
    report = (demo_outputs.dir / "demo-wildtrace" / "paper" / "04_report.html").read_text()
    # Empty sections are left out, with one line saying which and why.
    assert "Left out as empty:" in report and "Spending ceiling (No spending ceiling" in report
    for section in ("Spending ceiling", "Latency", "Batch mode"):
        assert f">{section}<" not in report
    # The prompts, whole, in an appendix; read from the record's prompts/ folder.
    judge = (demo_outputs.dir / "demo-wildtrace" / "prompts" / "judge.txt").read_text()
    assert "Appendix: prompts" in report and html.escape(judge.splitlines()[0], quote=False) in report
    compare = (demo_outputs.dir / COMPARE / "paper" / "05_compare.html").read_text()
    left_out = re.search(r"Left out as empty: ([^<]*)", compare)
    assert left_out and "Repeats (No run has repeats" in left_out.group(1) and ">Repeats<" not in compare
    assert "../demo-wildtrace/scores.json#" in compare
    # What the runs agree on, each thing once: the shared part stands for its keys, never beside them.
    agreed = re.search(r"agreeing on ([^)]*)\)", compare)
    assert agreed, compare[:2000]
    things = agreed.group(1).split(", ")
    assert len(things) == len(set(things)) and "shared" not in things and {"tasks", "judge_panel"} <= set(things)


def test_labels_plurals_and_parameters_from_the_benchmark(demo_outputs: DemoOutputs) -> None:
    from evalnb.views.words import plural

    assert [plural(w) for w in ("query", "case", "task", "match", "day")] == \
        ["queries", "cases", "tasks", "matches", "days"]
    geo = demo_outputs.dir / "demo-geoktools"
    report = (geo / "04_report.html").read_text()
    # Scored from a predictions file: labelled by the file, never `none:none`.
    assert "none:none" not in report and "predictions.jsonl" in report
    assert json.loads((geo / "evidence.json").read_text())["meta"]["model"] == "predictions.jsonl"
    queries = (demo_outputs.dir / "demo-geoexpertqueries" / "04_report.html").read_text()
    assert "querys" not in queries and "6 queries" in queries
    for name in RUNS:
        for notebook in sorted((demo_outputs.dir / name).glob("0*.ipynb")):
            nb = nbformat.read(notebook, as_version=4)
            [cell] = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
            own = name.removeprefix("demo-").removesuffix("-lead-3")
            assert f"demo_{own}.yaml" in cell.source and not Path(cell.source.split('"')[1]).is_absolute(), \
                (notebook, cell.source)
    # The prompts, as text in the record (the fingerprint keeps their hashes).
    wild = demo_outputs.dir / "demo-wildtrace"
    from evalnb.benchmarks.wildtrace.protocol import ANSWER_PROMPT, JUDGE_PROMPT
    assert (wild / "prompts" / "answer.txt").read_text() == ANSWER_PROMPT
    assert (wild / "prompts" / "judge.txt").read_text() == JUDGE_PROMPT
    assert "Today is 2026-11-30." in (demo_outputs.dir / "demo-geoexpertqueries" / "prompts" / "rater.txt").read_text()


def test_a_report_leaves_the_users_rcparams_alone(demo_outputs: DemoOutputs, tmp_path: Path) -> None:
    import matplotlib

    import evalnb

    copy = tmp_path / "demo-wildtrace"
    shutil.copytree(demo_outputs.dir / "demo-wildtrace", copy)
    config = json.loads((copy / "config.json").read_text()) | {"output_dir": str(copy)}
    with matplotlib.rc_context({"pdf.fonttype": 3, "font.size": 13.0, "axes.spines.top": True}):
        before = {k: v for k, v in matplotlib.rcParams.items() if not k.startswith("backend")}
        run = evalnb.open_run(config)
        for view in (evalnb.headline, evalnb.status_breakdown, evalnb.breakdown, evalnb.usage_table,
                     evalnb.score_histogram, evalnb.benchmark_figure, evalnb.judge_distributions):
            repr(view(run))
        after = {k: v for k, v in matplotlib.rcParams.items() if not k.startswith("backend")}
        assert after == before
        # ... and evalnb's own figures still embed TrueType, under a user's Type 3 setting.
        if shutil.which("pdffonts"):
            fonts = pdf_fonts(copy / "figures" / "score_histogram.pdf")
            assert fonts and not any("Type 3" in f for f in fonts)


def test_an_estimates_n_is_the_items_it_reads() -> None:
    """Checked against counts made by hand, for the metric kinds the benchmarks declare."""
    from evalnb.stats import metrics
    from evalnb.stats.metric_n import items_read
    from evalnb.core.types import Metric

    values = np.array([[0.5, np.nan, 1.0, 0.0, np.nan, 0.25]])
    strata = ["a", "a", "a", "b", "b", "b"]
    def n(fn):   # noqa: ANN001, ANN202
        return items_read(values, Metric("m", "m", fn), strata)
    assert n(metrics.mean()) == 4                     # the items with a score
    assert n(metrics.mean(missing="zero")) == 6       # every item (an unscored one counts as 0)
    assert n(metrics.stratum_mean("a")) == 2          # stratum a's scored items
    assert n(metrics.stratum_mean("b", missing="zero")) == 3
    assert n(metrics.share_scored()) == 6
    assert n(metrics.macro_mean()) == 4


def test_one_table_style_on_a_small_frame() -> None:
    from evalnb.views.tables import Estimate, Layout, paper_view, readable, view_markdown

    frame = pd.DataFrame({"model_a": ["x"], "model_b": ["y"], "n_common": [11], "mean_diff": [0.60189],
                          "ci_low": [0.36812], "ci_high": [0.82901], "flag": [True]})
    layout = Layout((Estimate("A - B", "mean_diff", "ci_low", "ci_high", "n_common"),), rename={"model_a": "A"})
    view = paper_view(frame, layout)
    assert list(view.frame.columns) == ["A", "model B", "A - B", "n"]   # the boolean gone, n beside it; the vocabulary's header
    assert view.frame.iloc[0].tolist() == ["x", "y", "0.602 [0.368, 0.829]", "11"]
    assert paper_view(frame, layout, decimals=2).frame.iloc[0, 2] == "0.60 [0.37, 0.83]"
    assert view.numeric == (False, False, True, True)
    shown = readable(frame, layout)
    assert 'text-align: left">x</td>' in shown._repr_html_() and shown.equals(frame)   # values untouched
    assert view_markdown(view).splitlines()[1] == "|:---|:---|---:|---:|"
    empty = readable(frame.iloc[:0], Layout(empty="No pair to compare."))
    assert empty._repr_html_() == '<p class="evalnb-empty">No pair to compare.</p>'


def test_a_file_fed_contestant_is_named_by_its_name_or_its_file() -> None:
    from evalnb.benchmarks.base import contestant_label
    from evalnb.benchmarks.geoktools import GeoKTools

    assert contestant_label(GeoKTools, "none", "none", {"predictions": "/data/x/preds.jsonl"}) == "preds.jsonl"
    assert contestant_label(GeoKTools, "none", "my-model", {"predictions": "/data/x/preds.jsonl"}) == "my-model"
    assert contestant_label(GeoKTools, "openai", "gpt-x", {"predictions": None}) == "openai:gpt-x"


def test_paths_in_a_paper_copy_are_relative_to_the_record(tmp_path: Path) -> None:
    from evalnb.pages.paper import relative_paths

    record, run = tmp_path / "outputs" / "cmp", tmp_path / "outputs" / "run-a"
    image = "data:image/png;base64,iVBORw0KGgo+/tmp/abc/def=="   # base64 text is not a path
    text = (f"see {run}/scores.json#t1 and `evalnb show {run} t1`; data {tmp_path}/elsewhere/cases.json; "
            f"here {record}/figures/x.png {image} https://example.org/a/b")
    shown = relative_paths(text, record, [record, record.parent])
    assert shown == ("see ../run-a/scores.json#t1 and `evalnb show ../run-a t1`; data cases.json; "
                     f"here figures/x.png {image} https://example.org/a/b")


def test_offline_bars_are_visibly_hatched(demo_outputs: DemoOutputs) -> None:
    """The demo's runs are offline: their leaderboard bars are grey and hatched, the hatch dark
    lines crossing the grey fill at print size (checked on the 300-dpi PNG's pixels)."""
    from PIL import Image

    from evalnb.views.figures import OFFLINE

    image = np.asarray(Image.open(demo_outputs.dir / COMPARE / "figures" / "leaderboard.png").convert("RGB"))
    def near(hex_colour: str) -> np.ndarray:
        target = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
        return np.abs(image.astype(int) - target).max(axis=2) <= 24
    fill, hatch = near(OFFLINE["facecolor"]), near(OFFLINE["edgecolor"])
    rows = [r for r in range(image.shape[0]) if fill[r].sum() > 20]   # rows crossing a grey bar
    assert rows, "no grey bar drawn"
    # along each such row, the hatch interrupts the fill again and again (not one edge line)
    crossings = [int(np.sum(np.diff(hatch[r].astype(int)) == 1)) for r in rows]
    assert np.median(crossings) >= 3, crossings
    assert hatch[rows].sum() > 0.1 * fill[rows].sum()   # a visible share of the bar, not a hairline


def test_only_a_section_that_ran_is_left_out_as_empty(tmp_path: Path) -> None:
    """A section whose cells ran and showed an empty table is left out with its reason; one whose
    cells never ran (the notebook stopped before them) is not called empty; a cleared progress
    bar (an output with no data) is dropped."""
    from evalnb.pages.paper import paper_copy

    def code(ran: bool, outputs: list[Any]) -> Any:
        cell = nbformat.v4.new_code_cell("evalnb.table(run)", outputs=outputs)
        cell.metadata["papermill"] = {"status": "completed" if ran else "pending"}
        cell.execution_count = 1 if ran else None
        return cell

    empty = nbformat.v4.new_output("display_data", {"text/html": '<p class="evalnb-empty">no judges</p>'})
    cleared = nbformat.v4.new_output("display_data", {})
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## Ran and empty"), code(True, [cleared, empty]),
        nbformat.v4.new_markdown_cell("## Never ran"), code(False, [])])
    path = tmp_path / "04_report.ipynb"
    nbformat.write(nb, path)
    page = paper_copy(path, "## Provenance", [tmp_path], tmp_path)
    header = page.cells[0].source
    assert "Left out as empty: Ran and empty (no judges)." in header and "Never ran" not in header
    assert any(c.source == "## Never ran" for c in page.cells)
    assert all(o.get("data") for c in page.cells if c.cell_type == "code" for o in c.outputs)
