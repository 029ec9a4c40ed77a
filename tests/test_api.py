"""The public benchmark API: evalnb.api, its generated reference page, named
per-item channels reaching a ratio metric and its interval (and its form, for the
statistics), the record rule a benchmark's records follow, and mypy --strict on the examples.

Intervals are checked against this file's own bootstrap (numpy's PCG64 seeded as stats'
module doc says: items drawn with replacement, the metric on each replicate, the 2.5 and 97.5
percentiles), never against numbers read back from the implementation.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from evalnb import api
from evalnb.app import apidoc
from evalnb.stats import intervals as stats
from evalnb.core.types import Metric
from evalnb.records.validation import known_statuses, record_problem
from tests.conftest import ROOT

N_BOOT, SEED = 4000, 7


def test_the_reference_page_is_what_the_docstrings_give() -> None:
    assert (ROOT / "docs" / "benchmark-api.md").read_text("utf-8") == apidoc.render(), \
        "docs/benchmark-api.md is out of date: run python -m evalnb.app.apidoc"


def test_every_public_name_states_its_contract() -> None:
    listed = [n for _, _, names in api.SECTIONS for n in names]
    assert sorted(listed) == sorted(api.__all__) and len(set(listed)) == len(listed)
    for name in api.__all__:
        value = getattr(api, name)
        if name in api.DATA_DOCS:
            continue
        assert inspect.getdoc(value), f"evalnb.api.{name} has no docstring"
    assert not [n for n in api.__all__ if n not in api.DATA_DOCS and not (inspect.isclass(getattr(api, n))
                                                                          or callable(getattr(api, n)))]


def test_importing_the_api_loads_no_pandas_or_matplotlib() -> None:
    done = subprocess.run([sys.executable, "-c", "import sys, evalnb.api; print(sorted(m for m in "
                           "('pandas', 'matplotlib', 'papermill') if m in sys.modules))"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- channels ------------------------------------------------------------------------------------------

CORRECT = np.array([1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1], dtype=float)
ATTEMPTED = np.array([1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1], dtype=float)
RATIO = Metric("given", "correct given attempted", api.ratio("correct", "attempted"), channels=("correct", "attempted"))
SHARE = Metric("correct", "correct", api.channel_mean("correct"), channels=("correct",))


def own_bootstrap(statistic, *columns: np.ndarray, n_boot: int = N_BOOT, seed: int = SEED) -> tuple[float, float]:
    draws = np.random.default_rng(seed).integers(0, len(columns[0]), size=(n_boot, len(columns[0])))
    reps = np.array([statistic(*(c[d] for c in columns)) for d in draws])
    low, high = np.quantile(reps[np.isfinite(reps)], [0.025, 0.975])
    return float(low), float(high)


def test_channels_reach_a_ratio_metric_and_its_interval() -> None:
    values = [list(CORRECT)]
    out = stats.metric_intervals(values, [RATIO, SHARE], n_boot=N_BOOT, seed=SEED,
                                 channels={"correct": [list(CORRECT)], "attempted": [list(ATTEMPTED)]})
    assert out["given"].mean == pytest.approx(7 / 9)   # 7 correct of 9 attempted, by hand
    assert (out["given"].low, out["given"].high) == pytest.approx(
        own_bootstrap(lambda c, a: c.sum() / a.sum() if a.sum() else np.nan, CORRECT, ATTEMPTED))
    assert out["correct"].mean == pytest.approx(7 / 12)
    assert (out["correct"].low, out["correct"].high) == pytest.approx(own_bootstrap(np.mean, CORRECT))


def test_channels_leave_the_scores_bootstrap_as_it_was() -> None:
    """The same draws with or without channels: a plain metric's interval does not move."""
    plain = Metric("mean", "mean", api.mean())
    alone = stats.metric_intervals([list(ATTEMPTED)], [plain], n_boot=N_BOOT, seed=SEED)["mean"]
    beside = stats.metric_intervals([list(ATTEMPTED)], [plain, RATIO], n_boot=N_BOOT, seed=SEED,
                                    channels={"correct": [list(CORRECT)], "attempted": [list(ATTEMPTED)]})["mean"]
    assert alone == beside


def test_a_metric_reading_a_channel_the_results_lack_is_named() -> None:
    with pytest.raises(ValueError, match=r"metric 'given' reads channel\(s\) attempted, which the results do not "
                                         r"have \(correct\)"):
        stats.metric_intervals([list(CORRECT)], [RATIO], channels={"correct": [list(CORRECT)]})


# --- the record rule -----------------------------------------------------------------------------------

JUDGE = known_statuses("judge", ())


@pytest.mark.parametrize("record, completion, problem", [
    ({"status": "ok", "text": "CORRECT"}, True, None),
    ({"status": "failed_parse", "text": None}, True, None),
    ({"status": "ok", "score": 1.0}, False, None),   # decided without a call: no text needed
    ({"text": "CORRECT"}, True, "no 'status' (one of ok, failed_parse, judge_refused, judge_empty, failed_transient, "
                                "failed_permanent, pending)"),
    ({"status": "graded", "text": "x"}, True, "'status' is 'graded', not one of ok, failed_parse, judge_refused, "
                                              "judge_empty, failed_transient, failed_permanent, pending"),
    ({"status": "ok"}, True, "no 'text' (the completion's text, or None)"),
    ({"status": "ok", "text": None}, True, "'text' is None in an 'ok' record"),
    ({"status": "ok", "text": 3}, False, "'text' is a int, expected a string or None"),
])
def test_the_record_rule(record: dict, completion: bool, problem: str | None) -> None:
    assert record_problem(record, JUDGE, completion=completion) == problem


# --- mypy --strict on the examples, as docs/architecture.md tells a benchmark's author to run it ------------

EXAMPLES = {"exact_qa": ("exact_qa_bench", "ExactQA"), "judge_qa": ("judge_qa_bench", "JudgeQA"),
            "two_turn": ("two_turn_bench", "TwoTurn"), "pairwise_qa": ("pairwise_qa_bench", "PairwiseQA")}
# The documented command: strict, but a dependency without type information (pandas) is not an
# error. evalnb itself must be found and typed (py.typed): a missing evalnb stays an error.
MYPY_STRICT = ["-m", "mypy", "--strict", "--disable-error-code=import-untyped", "--no-incremental"]


def mypy_examples(python: Path, folder: Path, env: dict[str, str]) -> None:
    """The examples, copied to ``folder`` (away from any checkout), each with the docs'
    conformance line, checked by ``python``'s mypy against the evalnb ``python`` imports."""
    files = []
    for name, (package, cls) in EXAMPLES.items():
        shutil.copytree(ROOT / "examples" / name / package, folder / package)
        (folder / f"conforms_{name}.py").write_text(f"from evalnb.api import Benchmark\nfrom {package} import {cls}\n\n"
                                                    f"_CHECKED: type[Benchmark] = {cls}\n")
        files += [f"conforms_{name}.py", package]
    done = subprocess.run([str(python), *MYPY_STRICT, *files], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "Success" in done.stdout, done.stdout + done.stderr


@pytest.mark.slow
def test_the_examples_pass_mypy_strict_against_an_editable_install(tmp_path: Path) -> None:
    """An editable install that mypy can read (``pip install -e . --config-settings
    editable_mode=compat``: a path line in a .pth, as here); setuptools' default import-hook
    editable install is invisible to mypy (docs/architecture.md says so)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", tmp_path / "venv"], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    purelib = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    # evalnb from the checkout (its source, py.typed beside it), every dependency from this environment
    (purelib / "evalnb_checkout.pth").write_text(f"{ROOT}\n{sysconfig.get_paths()['purelib']}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MYPYPATH")}
    (tmp_path / "work").mkdir()
    mypy_examples(python, tmp_path / "work", env)


def test_a_channel_metric_says_what_it_is() -> None:
    """For readers that need a metric's form, not only its value (standard errors, clusters)."""
    assert api.ratio("correct", "attempted").channel_ratio == ("correct", "attempted")   # type: ignore[attr-defined]
    assert api.channel_mean("correct").channel_ratio == ("correct", None)   # type: ignore[attr-defined]


def test_a_channel_metric_gives_its_form() -> None:
    """Per item, numerator and denominator: their sums' ratio is the metric (by hand here), the
    form the standard errors and the cluster bootstrap read (evalnb.stats.clustered)."""
    from evalnb.stats.clustered import form_of

    channels = {"correct": [list(CORRECT)], "attempted": [list(ATTEMPTED)]}
    form = form_of(RATIO.fn, [list(CORRECT)], {}, channels)
    assert form is not None and form.value() == pytest.approx(7 / 9)
    ((y, m),) = form.terms
    assert list(y) == list(CORRECT) and list(m) == list(ATTEMPTED)
    form = form_of(SHARE.fn, [[1.0, np.nan, 0.0]], {}, {"correct": [[1.0, np.nan, 0.0]]})
    assert form is not None and [list(t) for t in form.terms[0]] == [[1.0, 0.0, 0.0], [1.0, 0.0, 1.0]]
    assert form_of(RATIO.fn, [list(CORRECT)], {}) is None   # no channels given: no form, no guess
