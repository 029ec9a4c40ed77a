"""The wheel: built as `python -m build` builds it (a source distribution, then the wheel from
it), installed into a fresh virtual environment outside the checkout, and used from empty
folders: `evalnb demo`, and `evalnb init` followed by a run of the copied parameters.

Fast and offline: the build uses the setuptools already installed (no build isolation), and
the fresh environment takes evalnb's dependencies from this one through a .pth line instead of
downloading them (a plain path line: this environment's editable evalnb is not activated).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.test_api import mypy_examples

pytestmark = pytest.mark.slow

NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "outputs", "*.egg-info", "__pycache__",
                                    ".pytest_cache", ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints")


def _run(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args} exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _backend(call: str, cwd: Path) -> tuple[str, str]:
    """Run a PEP 517 hook of setuptools' backend in ``cwd``; its result and everything it printed."""
    done = _run([sys.executable, "-c", f"from setuptools import build_meta; print(build_meta.{call})"], cwd)
    return done.stdout.strip().splitlines()[-1], done.stdout + done.stderr


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("build")
    shutil.copytree(ROOT, work / "src", ignore=NOT_SOURCE)
    sdist_name, log = _backend(f"build_sdist({str(work / 'dist')!r})", work / "src")
    with tarfile.open(work / "dist" / sdist_name) as sdist:
        sdist.extractall(work / "unpacked", filter="data")
    unpacked = work / "unpacked" / sdist_name.removesuffix(".tar.gz")
    wheel_name, wheel_log = _backend(f"build_wheel({str(work / 'dist')!r})", unpacked)
    for text in (log, wheel_log):   # no deprecation (license table) or misconfiguration warning
        assert "Deprecat" not in text and "!!" not in text, text
    return work / "dist" / wheel_name


def test_wheel_carries_notebooks_parameters_samples_and_license(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        demo = zf.read("evalnb/_project/params/demo_wildtrace.yaml").decode()
    template = "evalnb/_project/"
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert f"{template}notebooks/{nb.name}" in names
    for params in sorted((ROOT / "params").glob("*.yaml")):
        assert f"{template}params/{params.name}" in names
    for sample in sorted((ROOT / "evalnb" / "data").rglob("*")):
        if sample.is_file():
            assert f"{template}data/{sample.relative_to(ROOT / 'evalnb' / 'data').as_posix()}" in names
    assert f"{template}examples/keyword_rater.py" in names
    assert "evalnb/py.typed" in names   # PEP 561: mypy reads the installed evalnb's annotations
    assert {"evalnb/benchmarks/geoexpertqueries/prompts/likert_scales.json", "evalnb/benchmarks/wildtrace/caps.json", "evalnb/benchmarks/geoexpertqueries/trace.schema.json", "evalnb/execution/batch/limits.json"} <= names
    assert not any(n.startswith(("evalnb/data/", "tests/", "notebooks/", "params/")) for n in names)
    assert "data: ../data/wildtrace/tasks.json" in demo
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    home = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", "--without-pip", home / "venv"], home)
    python = home / "venv" / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], home)
                   .stdout.strip())
    (purelib / "evalnb_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
                      "--no-compile", wheel], home)
    assert "Deprecat" not in installed.stdout + installed.stderr
    # nbconvert's HTML templates are data files under this environment's share/jupyter, which a
    # real install of the dependencies would have put under the fresh one's: lend them (only them).
    (home / "share").mkdir()
    (home / "share" / "nbconvert").symlink_to(Path(sys.prefix) / "share" / "jupyter" / "nbconvert")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env |= {"PATH": f"{python.parent}{os.pathsep}{env.get('PATH', '')}", "MPLBACKEND": "Agg",
            "JUPYTER_PATH": str(home / "share"), "JUPYTER_DATA_DIR": str(home / "jupyter"),
            "JUPYTER_CONFIG_DIR": str(home / "jupyter-config")}
    where = _run([python, "-c", "import evalnb.app.runs.notebooks as c; print(c.__file__); print(c.PROJECT)"], home, env)
    module, project = where.stdout.split()
    assert Path(module).is_relative_to(purelib) and Path(project) == purelib / "evalnb" / "_project"
    return python.parent, env


@pytest.mark.soak   # make soak: its smaller form runs in make test
def test_demo_from_an_empty_folder(venv: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    bin_dir, env = venv
    _run([bin_dir / "evalnb", "demo"], tmp_path, env, timeout=900)
    outputs = tmp_path / "outputs"
    for name in ("demo-wildtrace", "demo-wildtrace-lead-3", "demo-geoktools", "demo-geoexpertqueries"):
        scores = json.loads((outputs / name / "scores.json").read_text())
        assert scores["complete"] and scores["offline"], name
        assert (outputs / name / "04_report.html").exists()
        figures = {p.name for p in (outputs / name / "figures").iterdir()}
        assert "score_histogram.png" in figures and "score_histogram.pdf" in figures
    # The stages ran in kernels importing the installed wheel, not a checkout (no git commit).
    assert json.loads((outputs / "demo-wildtrace" / "manifest.json").read_text())["git_commit"] is None
    compare = outputs / "demo-compare-wildtrace"
    assert (compare / "compare.json").exists() and (compare / "paper" / "05_compare.html").exists()
    assert (outputs / "demo-wildtrace" / "paper" / "04_report.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"]


def test_init_then_run_and_render_from_an_empty_folder(venv: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    bin_dir, env = venv
    _run([bin_dir / "evalnb", "init"], tmp_path, env)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "examples", "notebooks", "params"]
    assert len(list((tmp_path / "notebooks").glob("*.ipynb"))) == 5
    _run([bin_dir / "evalnb", "run", "params/demo_geoexpertqueries.yaml"], tmp_path, env)
    run = tmp_path / "outputs" / "demo-geoexpertqueries"
    scores = json.loads((run / "scores.json").read_text())
    assert scores["complete"] and Path(scores["config"]["data"]).is_relative_to(tmp_path)
    rendered = _run([bin_dir / "evalnb", "render", "outputs/demo-geoexpertqueries", "--no-input"], tmp_path, env)
    assert "04_report.html" in rendered.stdout and (run / "paper" / "04_report.html").exists()


def test_the_examples_pass_mypy_strict_against_the_installed_wheel(venv: tuple[Path, dict[str, str]],
                                                                   tmp_path: Path) -> None:
    bin_dir, env = venv
    mypy_examples(bin_dir / "python", tmp_path, env)
