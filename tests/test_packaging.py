"""Packaging: declared dependencies, SPDX license metadata, the project template the wheel
carries, and an import that is light and changes no global state."""

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

from evalnb.app import project
from tests.conftest import ROOT


def test_environment_yml_mirrors_pyproject() -> None:
    project_table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project_table["optional-dependencies"]
    declared = set(project_table["dependencies"]) | set(extras["test"]) | set(extras["local-llm"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert set(pip) - {"-e ."} == declared


def test_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text().split("```")[1]
    assert re.findall(r"^make (\w+)", head, re.M) == ["demo", "test"]


def test_license_metadata_is_spdx() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"   # a string: PEP 639, not the deprecated table
    assert pyproject["project"]["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert any(re.fullmatch(r"setuptools>=(\d+)", r) and int(r.split(">=")[1]) >= 77
               for r in pyproject["build-system"]["requires"])


# --- light import, no side effects ----------------------------------------------------------------

HEAVY = ("matplotlib", "matplotlib.pyplot", "pandas", "IPython", "papermill", "nbclient", "nbformat",
         "nbconvert", "numpy", "openai", "anthropic", "scipy")


def _python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"} | env
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_import_evalnb_loads_no_plotting_pandas_or_notebook_machinery() -> None:
    code = (f"import sys, evalnb; print([m for m in {HEAVY!r} if m in sys.modules])\n"
            "import evalnb.stats.intervals; print([m for m in ('pandas', 'matplotlib', 'IPython') if m in sys.modules])")
    assert _python(code).split("\n")[:2] == ["[]", "[]"]


def test_cli_help_loads_none_of_them_either() -> None:
    code = ("import sys\nfrom evalnb.app.main import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    assert _python(code).strip().endswith("[]")


def test_public_names_resolve_lazily() -> None:
    import evalnb
    assert set(evalnb.__all__) == set(evalnb._EXPORTS)
    for name in evalnb.__all__:
        assert callable(getattr(evalnb, name)), name
    assert set(evalnb.__all__) <= set(dir(evalnb))


def test_importing_every_module_changes_no_global_state() -> None:
    """No matplotlib backend, event-loop policy, warnings filter or logging configuration is
    set by importing any evalnb module, nor by drawing an evalnb figure: every function that
    sets one is watched, and none may be called from evalnb's code (dependencies imported on
    the way may set their own)."""
    code = """
import asyncio, importlib, json, logging, pathlib, pkgutil, sys, tempfile, warnings
import matplotlib
calls = []
def watch(owner, name):
    original = getattr(owner, name)
    def watched(*args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "?")
        if caller.split(".")[0] == "evalnb":
            calls.append(f"{caller}: {name}")
        return original(*args, **kwargs)
    setattr(owner, name, watched)
for owner, name in ((matplotlib, "use"), (asyncio, "set_event_loop_policy"), (asyncio, "set_event_loop"),
                    (warnings, "filterwarnings"), (warnings, "simplefilter"), (warnings, "resetwarnings"),
                    (logging, "basicConfig"), (logging, "disable"), (logging, "captureWarnings"),
                    (logging.Logger, "setLevel"), (logging.Logger, "addHandler")):
    watch(owner, name)
policy = asyncio.get_event_loop_policy()
import evalnb
for info in pkgutil.walk_packages(evalnb.__path__, "evalnb."):
    importlib.import_module(info.name)
from evalnb.views.figures import new_figure, save_figure
fig = new_figure((2, 2)); fig.subplots().plot([0, 1])
save_figure(fig, pathlib.Path(tempfile.mkdtemp()), "x")
print(json.dumps([calls, matplotlib.rcParams._get_backend_or_none(), asyncio.get_event_loop_policy() is policy,
                  "matplotlib.pyplot" in sys.modules]))
"""
    calls, backend, same_policy, pyplot = json.loads(_python(code).strip().splitlines()[-1])
    assert calls == []
    assert backend is None                # still unresolved: nothing chose one
    assert same_policy
    assert not pyplot                     # evalnb figures never go through pyplot


def test_no_module_sets_global_state_in_its_source() -> None:
    pattern = re.compile(r"matplotlib\.use\(|set_event_loop_policy|filterwarnings|simplefilter|basicConfig"
                         r"|logging\.getLogger\(\)\.(setLevel|addHandler)|import matplotlib\.pyplot")
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "evalnb").rglob("*.py"))
                 for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def test_figures_save_headless_whatever_mplbackend(tmp_path: Path) -> None:
    """An interactive backend named in the environment (not even installed here) is never used."""
    code = f"""
from pathlib import Path
from evalnb.views.figures import new_figure, save_figure
fig = new_figure((3, 2)); fig.subplots().bar(["a", "b"], [1, 2])
save_figure(fig, Path({str(tmp_path)!r}), "bars")
png, size = fig._repr_png_()   # the image and its display size
assert png.startswith(b"\\x89PNG") and set(size) == {{"width", "height"}}
"""
    _python(code, MPLBACKEND="QtAgg")
    assert (tmp_path / "bars.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "bars.pdf").read_bytes().startswith(b"%PDF")


# --- the project template (what the wheel carries and `evalnb init` copies) -------------------------

def test_template_holds_every_notebook_and_parameters_file(tmp_path: Path) -> None:
    files = dict(project.template_files(ROOT))
    assert {f"notebooks/{p.name}" for p in (ROOT / "notebooks").glob("*.ipynb")} <= set(files)
    assert {f"params/{p.name}" for p in (ROOT / "params").glob("*.yaml")} <= set(files)
    assert "examples/keyword_rater.py" in files and "data/wildtrace/corpus/long_archive.txt" in files
    for name, content in files.items():
        if name.startswith("notebooks/"):
            assert content == (ROOT / name).read_bytes()      # notebooks verbatim
        if name.startswith("params/"):
            assert b"../evalnb/" not in content


def test_template_demo_parameters_reach_their_samples(tmp_path: Path) -> None:
    from evalnb.pipeline.run import load_config

    project.write_template(ROOT, tmp_path)
    for params in sorted((tmp_path / "params").glob("demo_*.yaml")):
        config, _ = load_config(params)
        values = config.to_dict()
        paths = [values.get(key) for key in ("data", "corpus", "predictions", "traces") if values.get(key)]
        paths += [arg for judge in values.get("judges") or [] for arg in (judge.get("command") or [])[1:]]
        assert paths, params
        for path in paths:
            assert Path(path).exists() and Path(path).is_relative_to(tmp_path), (params.name, path)


def test_project_dir_is_the_checkout_in_an_editable_install() -> None:
    from evalnb.app.runs.notebooks import COMPARE_NOTEBOOK, PROJECT
    assert project.project_dir() == PROJECT == ROOT
    assert COMPARE_NOTEBOOK == ROOT / "notebooks" / "05_compare.ipynb"


def test_sdist_manifest_grafts_what_the_template_is_built_from() -> None:
    manifest = (ROOT / "MANIFEST.in").read_text()
    for folder in ("notebooks", "params", "evalnb/data", "evalnb/examples"):
        assert f"graft {folder}" in manifest
