"""Every table of a three-contestant, three-judge comparison, exported as a paper takes it: it
compiles in a one-column article (default fit) and in a two-column one (``--fit column``)
without an overfull line, every header is in the PDF's text, and every header a reader sees
(notebook views, exports, terminal) is a word of the one vocabulary (evalnb.views.labels)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import evalnb
from evalnb.app.main import main
from evalnb.app.results import compare_results, compare_text
from evalnb.comparison.compare import open_compare
from evalnb.pages.exports import PaperTable, paper_tables, write_paper_tables
from evalnb.views.labels import header, known, metric_words, snake_case
from evalnb.views.tables import paper_view
from tests.test_judge_panel import judged_run, panel_verdicts

VIEWS = ("leaderboard", "pairwise", "paired_differences", "judge_means", "judge_agreement", "disagreements",
         "panel_reliability", "leave_one_judge_out", "self_preference", "length_bias", "repeats_table", "leaderboard_figure")
NEEDED = {"leaderboard", "pairwise", "paired_differences", "judge_means", "judge_agreement", "disagreements",
          "judge_reliability", "leave_one_judge_out", "self_preference", "length_bias"}


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three contestants (one of a judge's family, with long names), a three-judge panel, the
    answers' lengths: every judges' table applies. Each compare view computed, then saved."""
    root = tmp_path_factory.mktemp("paper")
    lengths = [200 + 40 * i for i in range(40)]
    fam = (None, None, "anthropic")
    runs = [judged_run(root, "anthropic-claude-long-model-name-2026", panel_verdicts(0, 0.6, 0.1, items=40),
                       family="anthropic", judge_families=fam, lengths=lengths),
            judged_run(root, "qwen3-235b-a22b-instruct-2507", panel_verdicts(1, 0.5, items=40), family="qwen",
                       judge_families=fam, lengths=lengths[::-1]),
            judged_run(root, "gamma", panel_verdicts(2, 0.4, items=40), judge_families=fam, lengths=lengths)]
    cmp = open_compare(runs, root / "cmp", n_boot=200)
    for view in VIEWS:
        getattr(evalnb, view)(cmp)
    evalnb.save_compare(cmp)
    return root / "cmp"


def headers_of(table: PaperTable) -> list[str]:
    return [str(c) for c in table.view().frame.columns]


def test_every_view_is_exported(compared: Path) -> None:
    names = {t.name for t in paper_tables(compared)}
    assert NEEDED <= names, NEEDED - names


def test_every_header_is_a_word_of_the_one_vocabulary(compared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.benchmarks.wildtrace import WildTrace

    # the benchmark's own words: its metrics, and the plural of its item and cluster nouns (a count's header)
    words = set(metric_words(WildTrace.metrics()).values()) | {"tasks", "documents"}
    tables = paper_tables(compared)
    seen = [(t.name, h) for t in tables for h in headers_of(t)]
    for t in tables:   # --columns all: every column the notebook shows
        seen += [(t.name, str(h)) for h in paper_view(t.frame, t.chosen(["all"])).frame.columns]
    doc = compare_results(compared)
    text = compare_text(doc)
    table_lines = text.splitlines()[1:2]
    seen += [("terminal", h) for h in re.split(r"\s{2,}", table_lines[0].strip())]
    for where, head in seen:
        assert not snake_case(head), (where, head)
        shown = head.removesuffix(" [95% CI]")
        assert known(head, words) or shown in words, (where, head)
    # the same metric words and pair order in the terminal, the exports and the notebook's table
    pairs = pd.read_csv(compared / "pairwise.csv")
    board = list(pd.read_csv(compared / "leaderboard.csv")["model"])
    assert all(board.index(a) < board.index(b) for a, b in zip(pairs["model_a"], pairs["model_b"]))
    shown = paper_view(next(t for t in tables if t.name == "pairwise").frame,
                       next(t for t in tables if t.name == "pairwise").layout).frame
    assert set(shown["metric"]) <= words and "all_tasks" not in text
    # the n of each metric beside it; P(first) with the notebook's three decimals
    head = re.split(r"\s{2,}", table_lines[0].strip())
    assert [h for h in head if h != "n"][2:4] == ["All [95% CI]", "Scored [95% CI]"]
    assert head.count("n") == 2 and head[head.index("All [95% CI]") + 1] == "n"
    p_first = head.index("P(first)")
    first_row = re.split(r"\s{2,}", text.splitlines()[2].strip())
    assert re.fullmatch(r"\d\.\d{3}", first_row[p_first]), first_row
    # the data dictionary beside the CSV files says what each machine column is
    assert main(["export", str(compared), "--format", "csv", "-o", str(compared.parent / "csv")]) == 0
    dictionary = pd.read_csv(compared.parent / "csv" / "columns.csv")
    for name in ("leaderboard", "pairwise", "disagreements"):
        frame = pd.read_csv(compared.parent / "csv" / f"{name}.csv")
        assert not any(str(c).startswith("Unnamed") for c in frame.columns), name
        assert set(frame.columns) <= set(dictionary[dictionary["table"] == name]["column"])
    assert header("p_holm") == "p (Holm)"


def compile_tex(folder: Path, name: str, body: str, twocolumn: bool = False) -> tuple[str, str]:
    options = "[twocolumn]" if twocolumn else ""
    (folder / f"{name}.tex").write_text(f"\\documentclass{options}{{article}}"
                                        "\\usepackage{booktabs,graphicx,rotating}\\input{glyphtounicode}\\pdfgentounicode=1\n"
                                        "\\begin{document}\n"
                                        f"{body}\n\\end{{document}}\n")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", f"{name}.tex"], cwd=folder,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:]
    log = (folder / f"{name}.log").read_text(errors="replace")
    text = subprocess.run(["pdftotext", "-layout", f"{name}.pdf", "-"], cwd=folder, capture_output=True, text=True,
                          check=True, timeout=120).stdout
    return log, text


def overfull(log: str) -> list[float]:
    return [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log) if float(x) > 1.0]


@pytest.mark.skipif(not (shutil.which("pdflatex") and shutil.which("pdftotext")), reason="no pdflatex/pdftotext")
def test_every_table_fits_the_page_and_figures_compile(compared: Path, tmp_path: Path) -> None:
    for fit, twocolumn in (("text", False), ("column", True)):
        out = tmp_path / f"tables-{fit}.tex"
        assert main(["export", str(compared), "--format", "latex", "--fit", fit, "-o", str(out)]) == 0
        log, text = compile_tex(tmp_path, f"paper-{fit}", f"\\input{{tables-{fit}.tex}}", twocolumn)
        assert not overfull(log), (fit, overfull(log))
        flat = re.sub(r"\s+", " ", text)
        for table in paper_tables(compared):
            for head in headers_of(table):
                # a header LaTeX wraps or hyphenates at a line end still shows every word
                assert all(word in flat for word in head.replace("-", " ").split()), (fit, table.name, head)
    out = tmp_path / "tables-landscape.tex"   # every column, on a turned page
    assert main(["export", str(compared), "--format", "latex", "--fit", "landscape", "--columns", "all",
                 "-o", str(out)]) == 0
    log, _ = compile_tex(tmp_path, "paper-landscape", "\\input{tables-landscape.tex}")
    assert not overfull(log)
    paper = compared / "paper"   # what render writes beside the pages
    write_paper_tables(compared, paper)
    assert (paper / "figures.tex").exists() and (paper / "captions.md").exists()
    figures = (paper / "figures.tex").read_text()
    assert figures.count("\\begin{figure}") == len(list((compared / "figures").glob("*.pdf"))) >= 1
    assert "\\label{fig:evalnb-leaderboard}" in figures and "\\caption{" in figures
    log, _ = compile_tex(paper, "figures-check", "\\input{figures.tex}")
    assert not overfull(log)


def terminal_headers(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def check_headers(heads: list[str], extra: set[str], where: str) -> None:
    for head in heads:
        assert not snake_case(head), (where, head)
        assert known(head, extra) or head.removesuffix(" [95% CI]") in extra, (where, head)


def test_plan_suite_and_status_print_in_the_vocabulary(compared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.app.results import run_results, suite_text
    from evalnb.app.suite.state import _runs_table
    from evalnb.benchmarks.wildtrace import WildTrace

    words = set(metric_words(WildTrace.metrics()).values())
    capsys.readouterr()
    assert main(["plan", str(compared), "--delta", "0.05"]) == 0
    lines = capsys.readouterr().out.splitlines()
    check_headers(terminal_headers(lines[1]), words, "plan")
    board = list(pd.read_csv(compared / "leaderboard.csv")["model"])
    rows = [terminal_headers(line) for line in lines[2:]]
    assert {r[0] for r in rows} <= words   # the metric's word, as the leaderboard says it
    assert all(board.index(r[1]) < board.index(r[2]) for r in rows)   # the leaderboard's pair order
    assert not any(re.fullmatch(r"-?\d+\.\d{4,}", c) for r in rows for c in r)   # no six decimals
    # a run's scores as the aggregate stage writes them: Scored rests on 11 items, All on 12
    metrics = {"all_tasks": {"label": "All: every task", "value": 0.5, "ci": {"low": 0.4, "high": 0.6}, "n": 12,
                             "headline": True},
               "scored": {"label": "Scored: tasks scored", "value": 0.55, "ci": {"low": 0.45, "high": 0.65}, "n": 11,
                          "headline": True}}
    run = compared.parent / "suite-run"
    run.mkdir(exist_ok=True)
    (run / "scores.json").write_text(json.dumps({"benchmark": "wildtrace", "run_name": "r", "metrics": metrics}))
    doc = {"suite_name": "s", "suite_dir": "suite", "leaderboard": {"state": "complete"},
           "runs": {"a": {**run_results(run), "state": "complete"}}}
    lines = suite_text(doc).splitlines()
    heads = terminal_headers(lines[1])
    check_headers(heads, words, "suite")
    assert heads[2:] == ["All [95% CI]", "n", "Scored [95% CI]", "n"]
    assert terminal_headers(lines[2])[2:] == ["0.500 [0.400, 0.600]", "12", "0.550 [0.450, 0.650]", "11"]
    table = _runs_table({"a": {"run_dir": str(run), "state": "complete", "calls": 3, "input_tokens": 10,
                               "output_tokens": 5, "spent_usd": 0.0}})
    check_headers(terminal_headers(table[0]), words, "status")
    assert terminal_headers(table[1])[2:6] == ["0.500 [0.400, 0.600]", "12", "0.550 [0.450, 0.650]", "11"]


def test_long_model_names_get_a_key_in_a_column_table(compared: Path, tmp_path: Path) -> None:
    out = tmp_path / "column.tex"
    assert main(["export", str(compared), "--format", "latex", "--fit", "column", "-o", str(out)]) == 0
    tex = out.read_text()
    body = tex.split("\\midrule")[1].split("\\bottomrule")[0]   # the leaderboard's rows
    assert "anthropic-claude-long-model-name-2026" not in body and "M1" in body and "gamma" in body
    assert "M1 = anthropic-claude-long-model-name-2026" in tex   # the key, in the caption
    wide = tmp_path / "text.tex"
    assert main(["export", str(compared), "--format", "latex", "-o", str(wide)]) == 0
    assert "gamma &" in wide.read_text() and "M1 = anthropic-claude-long-model-name-2026" in wide.read_text()


def test_the_vocabulary_itself() -> None:
    from evalnb.views.labels import ABBREVIATIONS, LABELS, abbreviations, data_dictionary

    # no header of the table is a code name, and every entry says what it means
    assert all(not snake_case(label.header) and label.meaning for label in LABELS.values())
    # a new column without an entry shows its code name, which the vocabulary test refuses
    assert header("cluster_wilson_low") == "cluster_wilson_low" and snake_case(header("cluster_wilson_low"))
    assert not known("cluster_wilson_low")
    assert known("MDE (90% power)") and known("share |A - B| > 0.2") and known("items needed, 4 repeats")
    note = abbreviations(["A - B [95% CI]", "n", "p (Holm)", "MDE (80% power)", "model"])
    assert note.startswith("Abbreviations: ") and all(f"{a}: " in note for a in ("CI", "n", "MDE", "p (Holm)"))
    assert "SE:" not in note and set(ABBREVIATIONS) >= {"CI", "SE", "MDE", "P(first)"}
    rows = {r["column"]: r for r in data_dictionary(["p_holm", "all_tasks_ci_low", "all_tasks_n"])}
    assert rows["p_holm"]["header"] == "p (Holm)" and "Holm" in rows["p_holm"]["meaning"]
    assert "lower end" in rows["all_tasks_ci_low"]["meaning"] and "rests on" in rows["all_tasks_n"]["meaning"]
