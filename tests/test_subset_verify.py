"""``evalnb verify`` of a run over part of the data (``--limit``) rebuilds over the run's own
subset, not the whole data file: an untouched subset run of the built-in wildtrace (offline
baselines) and of the shipped ``exact_qa`` example verifies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from evalnb.app.main import main
from tests.conftest import ROOT, SAMPLE, offline_params


def verified(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = main(["verify", str(run)])
    return code, capsys.readouterr().out.splitlines()


@pytest.mark.slow
def test_a_limit_run_of_wildtrace_verifies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(SAMPLE, tmp_path / "data")
    params = offline_params(tmp_path) | {"data": str(tmp_path / "data" / "tasks.json"),
                                         "corpus": str(tmp_path / "data" / "corpus"),
                                         "output_dir": str(tmp_path / "run")}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params), "utf-8")
    assert main(["run", str(tmp_path / "params.yaml"), "--limit", "2"]) == 0
    (run,) = [p for p in tmp_path.iterdir() if p.name.startswith("run") and p.is_dir()]
    assert verified(run, capsys) == (0, [])


@pytest.mark.slow
def test_a_limit_run_of_the_exact_qa_example_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    example = Path(shutil.copytree(ROOT / "examples" / "exact_qa", tmp_path / "exact_qa",
                                   ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build")))
    monkeypatch.syspath_prepend(str(example))
    monkeypatch.setenv("PYTHONPATH", str(example))   # what the stage kernels import it from
    assert main(["run", str(example / "params.yaml"), "--set", "benchmark=exact_qa_bench:ExactQA",
                 "--set", f"output_dir={tmp_path / 'out' / 'qa'}", "--limit", "3"]) == 0
    (run,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    assert verified(run, capsys) == (0, [])
