"""A benchmark of your own without a fork: ``examples/exact_qa`` selected by an
import path and by an ``evalnb.benchmarks`` entry point, end to end through ``evalnb run``
(its four stage notebooks, scores.json, tasks.html in a browser), a resume and ``evalnb
compare``; and the resolution rules of ``evalnb.benchmarks.benchmark_for`` with their
one-line errors.

The entry point is registered without installing anything into the test venv: a minimal
``exact_qa-0.0.dist-info`` (METADATA, entry_points.txt) in a temporary folder on
``PYTHONPATH``, where importlib.metadata finds it as it finds an installed distribution's.
Expected scores are computed here from the data and the recorded answers, with this
file's own normaliser and its own bootstrap (stats' documented procedure), not read back
from the example's code.
"""

from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalnb.benchmarks import benchmark_for
from evalnb.benchmarks.wildtrace import WildTrace
from evalnb.core.errors import ConfigError
from evalnb.pipeline.run import load_config
from tests.conftest import ROOT
from tests.test_tasks_page import browser, open_page, visible_ids  # noqa: F401  (browser: a fixture)

SOURCE = ROOT / "examples" / "exact_qa"
IMPORT_PATH = "exact_qa_bench:ExactQA"
EVALNB = Path(sys.executable).parent / "evalnb"   # the venv's console script
STAGES = ("01_generate", "02_judge", "03_aggregate", "04_report")
N_BOOT, SEED = 2000, 0   # as params.yaml sets them


def questions() -> list[dict[str, str]]:
    return [json.loads(line) for line in (SOURCE / "questions.jsonl").read_text("utf-8").splitlines() if line.strip()]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    """The example's files, copied: an ``exact_qa.egg-info`` that ``pip install -e`` leaves in
    the checkout would register the entry point for whoever puts the folder on sys.path."""
    return Path(shutil.copytree(SOURCE, tmp_path / "exact_qa",
                                ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build")))


def dist_info(folder: Path, name: str, entry_points: dict[str, str]) -> Path:
    """A distribution as importlib.metadata sees one installed: ``folder`` goes on sys.path."""
    info = folder / f"{name}-0.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[evalnb.benchmarks]\n{lines}")
    return folder


# --- resolution, in process ---------------------------------------------------------------------------

def test_an_import_path_selects_the_class(example: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(example))
    bench = benchmark_for(IMPORT_PATH)
    assert bench.__name__ == "ExactQA" and bench.__module__ == "exact_qa_bench"


def test_an_entry_point_selects_the_class(tmp_path: Path, example: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(example))
    monkeypatch.syspath_prepend(str(dist_info(tmp_path / "site", "exact_qa", {"exact_qa": IMPORT_PATH})))
    assert importlib.util.find_spec("exact_qa") is None   # not a module: only the entry point knows it
    assert benchmark_for("exact_qa") is benchmark_for(IMPORT_PATH)


def test_a_built_in_name_wins_over_an_entry_point(tmp_path: Path, example: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(example))
    monkeypatch.syspath_prepend(str(dist_info(tmp_path / "site", "shadow", {"wildtrace": IMPORT_PATH})))
    assert benchmark_for("wildtrace") is WildTrace
    with pytest.raises(ConfigError) as error:   # and a shadowed name is not offered as an entry point
        benchmark_for("mmlu")
    offered = str(error.value).split("nor an entry point of evalnb.benchmarks (", 1)[1].split(")", 1)[0]
    assert "wildtrace" not in offered


def test_one_name_declared_for_two_classes_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(dist_info(tmp_path / "a", "one", {"qa": IMPORT_PATH})))
    monkeypatch.syspath_prepend(str(dist_info(tmp_path / "b", "two", {"qa": "other_bench:QA"})))
    with pytest.raises(ConfigError, match=r"^benchmark: 'qa': installed distributions declare it as different "
                                          r"classes \(exact_qa_bench:ExactQA, other_bench:QA\); select one by its "
                                          r"import path$"):
        benchmark_for("qa")


BARE = '''
from evalnb.benchmarks.base import BaseBenchmark


class Bare(BaseBenchmark):
    NAME = "bare"


class Half:
    NAME = "half"
    OPTIONS = {}

    @classmethod
    def metrics(cls):
        return ()


def not_a_class():
    pass
'''


# (what the parameters say, the whole message; or its start, when it ends with "...")
@pytest.mark.parametrize("name, message", [
    ("mmlu", "benchmark: 'mmlu' is not one of geoexpertqueries, geoktools, wildtrace (built-in) nor an entry point "
             "of evalnb.benchmarks (exact_qa, half); a benchmark of your own: an import path package.module:Class"),
    ("no_such_pkg.bench:B", "benchmark: 'no_such_pkg.bench:B': cannot import module 'no_such_pkg.bench': "
                            "No module named 'no_such_pkg'"),
    ("needs_dep:B", "benchmark: 'needs_dep:B': cannot import module 'needs_dep': No module named 'missing_dependency'"),
    ("bare_bench:Nothing", "benchmark: 'bare_bench:Nothing': module 'bare_bench' has no 'Nothing'"),
    ("bare_bench:not_a_class", "benchmark: 'bare_bench:not_a_class': expected a class, got function"),
    ("bare_bench:", "benchmark: 'bare_bench:': expected an import path package.module:Class"),
    ("bare_bench:Bare", "benchmark: 'bare_bench:Bare': Bare is not a benchmark: it lacks OPTIONS, PATH_OPTIONS, "
                        "COMPARABLE_PARTS, ITEM, ITEM_NOUN, FIGURE, fingerprint_parts(), generation_calls(), "
                        "judge_calls(), score(), evidence(), results(), breakdown(), figure() "
                        "(see evalnb.benchmarks.Benchmark; evalnb.benchmarks.base.BaseBenchmark has defaults)"),
    ("bare_bench:Half", "benchmark: 'bare_bench:Half': Half is not a benchmark: it lacks PATH_OPTIONS, "
                        "COMPARABLE_PARTS, STATUSES, ITEM, ITEM_NOUN, FIGURE, check_documents(), summary_rows(), "
                        "fingerprint_parts(), describe(), generation_calls(), generation_done(), judge_calls(), judge_done(), "
                        "score(), evidence(), results(), breakdown(), figure(), report_tables(), compare_tables(), "
                        "compare_figure() (see ..."),
    ("half (entry point)", "benchmark: 'half' (entry point evalnb.benchmarks -> bare_bench:Half): Half is not a "
                           "benchmark: it lacks PATH_OPTIONS, ..."),
])
def test_errors_are_one_line_naming_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  name: str, message: str) -> None:
    (tmp_path / "bare_bench.py").write_text(BARE)
    (tmp_path / "needs_dep.py").write_text("import missing_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(dist_info(tmp_path / "eps", "exact_qa", {"exact_qa": IMPORT_PATH,
                                                                             "half": "bare_bench:Half"})))
    with pytest.raises(ConfigError) as error:
        benchmark_for(name.removesuffix(" (entry point)"))
    text = str(error.value)
    assert "\n" not in text
    if message.endswith("..."):
        assert text.startswith(message.removesuffix("...")), text
    else:
        assert text == message


def test_a_parameters_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("benchmark: no_such_pkg:Bench\nrun_name: r\ndata: d.jsonl\n")
    with pytest.raises(ConfigError, match=rf"^{path}: benchmark: 'no_such_pkg:Bench': cannot import module"):
        load_config(path)


def test_set_benchmark_decides_which_paths_are_file_relative(tmp_path: Path) -> None:
    """``--set benchmark=...`` is the benchmark the file's paths are read for (its path options)."""
    gk = ROOT / "evalnb" / "data" / "geoktools"
    (tmp_path / "cases.json").write_bytes((gk / "cases.json").read_bytes())
    (tmp_path / "answers.jsonl").write_bytes((gk / "predictions.jsonl").read_bytes())
    path = tmp_path / "p.yaml"
    path.write_text("benchmark: mmlu\nrun_name: r\ndata: cases.json\npredictions: answers.jsonl\n")
    config, bench = load_config(path, ["benchmark=geoktools"])
    assert bench.NAME == "geoktools" and config.options["predictions"] == str(tmp_path / "answers.jsonl")


# --- end to end through `evalnb run` and `evalnb compare` ------------------------------------------------

def evalnb(args: list[str], cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess[str]:
    """The console script in a fresh process; its stage kernels inherit this environment."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([str(EVALNB), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def normalised(text: str) -> str:
    kept = "".join(ch for ch in text.lower() if ch.isalnum() or ch.isspace())
    return " ".join(w for w in kept.split() if w not in {"a", "an", "the"})


def bootstrap(scores: list[float]) -> tuple[float, float]:
    """The percentile interval of the mean: n_boot resamples of the items, numpy's PCG64 seeded."""
    draws = np.random.default_rng(SEED).integers(0, len(scores), size=(N_BOOT, len(scores)))
    low, high = np.quantile(np.asarray(scores)[draws].mean(axis=1), [0.025, 0.975])
    return float(low), float(high)


def check_run(run: Path, benchmark: str) -> float:
    """The four stage records, the recorded name, and scores.json against our own scoring."""
    for stage in STAGES:
        nb = json.loads((run / f"{stage}.ipynb").read_text("utf-8"))
        errors = [o for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
        assert not errors and (run / f"{stage}.html").is_file(), stage
    assert json.loads((run / "config.json").read_text())["benchmark"] == benchmark
    scores = json.loads((run / "scores.json").read_text())
    answers = {r["task_id"]: r for r in json.loads((run / "responses.json").read_text())["records"]}
    expected = [float(answers[q["id"]]["status"] == "ok" and normalised(answers[q["id"]]["response"])
                      == normalised(q["answer"])) for q in questions()]
    assert scores["benchmark"] == benchmark and scores["complete"] is True
    assert [r["score"] for r in scores["tasks"]] == expected
    accuracy = scores["metrics"]["accuracy"]
    assert accuracy["value"] == pytest.approx(sum(expected) / len(expected))
    assert (accuracy["ci"]["low"], accuracy["ci"]["high"]) == pytest.approx(bootstrap(expected))
    assert (run / "tasks.html").is_file() and (run / "figures" / "accuracy.png").is_file()
    return float(accuracy["value"])


def run_pair(tmp_path: Path, example: Path, pythonpath: list[Path], sets: list[str]) -> dict[str, Path]:
    """Both toy contestants on the example's parameters file, then `evalnb compare` over them."""
    runs = {}
    for model in ("calculator", "last-number"):
        done = evalnb(["run", str(example / "params.yaml"), *sets, "--set", f"model.name={model}", "--set", f"run_name=qa-{model}"],
                      tmp_path, pythonpath)
        assert done.returncode == 0, done.stderr
        runs[model] = tmp_path / "outputs" / f"qa-{model}"
    done = evalnb(["compare", str(runs["calculator"]), str(runs["last-number"]), "--out", "cmp"], tmp_path, pythonpath)
    assert done.returncode == 0, done.stderr
    return runs


def check_compare(folder: Path, benchmark: str, accuracies: dict[str, float]) -> None:
    assert json.loads((folder / "compare.json").read_text())["benchmark"] == benchmark
    with (folder / "leaderboard.csv").open() as f:
        board = {row["model"]: float(row["accuracy"]) for row in csv.DictReader(f)}
    assert board == pytest.approx(accuracies)
    assert (folder / "05_compare.html").is_file()


@pytest.mark.slow
def test_by_import_path_end_to_end(tmp_path: Path, example: Path, browser: Any) -> None:  # noqa: F811
    runs = run_pair(tmp_path, example, [example], ["--set", f"benchmark={IMPORT_PATH}"])
    accuracies = {model: check_run(run, IMPORT_PATH) for model, run in runs.items()}
    # By hand from questions.jsonl and contestant.py: the calculator does q1, q2, q3 and q7;
    # the last number in the question is the answer to q4 only.
    assert accuracies == pytest.approx({"calculator": 4 / 7, "last-number": 1 / 7})
    check_compare(tmp_path / "cmp", IMPORT_PATH, accuracies)

    # A resume resolves the recorded name again, and has nothing left to call.
    calls = (runs["calculator"] / "generate.jsonl").read_text()
    done = evalnb(["run", str(example / "params.yaml"), "--set", f"benchmark={IMPORT_PATH}",
                   "--set", "run_name=qa-calculator"], tmp_path, [example])
    assert done.returncode == 0 and "run complete" in done.stderr, done.stderr
    assert (runs["calculator"] / "generate.jsonl").read_text() == calls

    # What a reviewer sees: every question, and one opened with its answer and golden answer.
    open_page(browser, runs["last-number"] / "tasks.html")
    assert visible_ids(browser) == [q["id"] for q in questions()]
    browser.find_element("css selector", "tr.item[data-id='q4']").click()
    detail = browser.find_element("css selector", "tr.detail").text
    assert "Which is larger, 3 or 11?" in detail and "golden answer" in detail and "11" in detail


@pytest.mark.slow
def test_by_entry_point_end_to_end(tmp_path: Path, example: Path) -> None:
    """params.yaml as shipped (``benchmark: exact_qa``), the name only an entry point gives."""
    params = example / "params.yaml"
    registered = dist_info(tmp_path / "site", "exact_qa", {"exact_qa": IMPORT_PATH})
    if not importlib.metadata.entry_points(group="evalnb.benchmarks", name="exact_qa"):   # else installed here
        refused = evalnb(["run", str(params)], tmp_path, [example])   # importable, but not registered
        assert refused.returncode == 1
        assert refused.stderr.strip().endswith(f"{params}: benchmark: 'exact_qa' is not one of geoexpertqueries, "
                                               "geoktools, wildtrace (built-in) nor an entry point of "
                                               "evalnb.benchmarks (none installed); a benchmark of your own: an "
                                               "import path package.module:Class"), refused.stderr
        assert not (tmp_path / "outputs").exists()

    runs = run_pair(tmp_path, example, [registered, example], [])
    accuracies = {model: check_run(run, "exact_qa") for model, run in runs.items()}
    check_compare(tmp_path / "cmp", "exact_qa", accuracies)

    # Two names of one class are one benchmark: a run selected by its import path compares too.
    done = evalnb(["run", str(params), "--set", f"benchmark={IMPORT_PATH}", "--set", "run_name=qa-by-path"],
                  tmp_path, [registered, example])
    assert done.returncode == 0, done.stderr
    by_path = tmp_path / "outputs" / "qa-by-path"
    done = evalnb(["compare", str(by_path), str(runs["last-number"]), "--out", "mixed"], tmp_path,
                  [registered, example])
    assert done.returncode == 0, done.stderr
    check_compare(tmp_path / "mixed", IMPORT_PATH, {"calculator": check_run(by_path, IMPORT_PATH),
                                                    "last-number": accuracies["last-number"]})


# mypy --strict on this example and judge_qa, as the docs say to run it: tests/test_api.py and
# tests/test_wheel.py (an editable install and an installed wheel).
