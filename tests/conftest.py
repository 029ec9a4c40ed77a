"""Shared fixtures: the local fake LLM server, sample paths and parameter builders."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakeserver import FakeLLMServer, RecordedRequest, Text

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "evalnb" / "data" / "wildtrace"
FAST_RETRY = {"max_retries": 5, "base_delay": 0.01, "max_delay": 0.02, "retry_after_cap": 0.3}


@pytest.fixture(autouse=True)
def own_quota_ledgers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test paces against quota ledgers of its own (evalnb.providers.ledger), never the
    user's, and never another test's."""
    monkeypatch.setenv("EVALNB_QUOTA_DIR", str(tmp_path / "quota-ledgers"))


def pytest_configure(config: pytest.Config) -> None:
    """Fixtures wider than one test (a module's run, the session's demo) get the session's own
    response cache, never the user's: set before any of them runs."""
    import os
    import tempfile

    os.environ["EVALNB_CACHE"] = tempfile.mkdtemp(prefix="evalnb-test-cache-")


@pytest.fixture(autouse=True)
def own_response_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets a response cache of its own, never the user's and never another test's:
    a test that counts the fake server's requests sees only what it caused itself."""
    folder = tmp_path / "response-cache"
    monkeypatch.setenv("EVALNB_CACHE", str(folder))
    return folder


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def judge_total_for(prompt: str) -> int:
    """A deterministic verdict derived from the judge prompt (so reruns agree)."""
    return int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % 101


def deterministic_responder(request: RecordedRequest) -> Text:
    if request.prompt.startswith("STRICT grader."):
        total = judge_total_for(request.prompt)
        return Text(f'Here is my grading.\n```json\n{{"points_awarded":[{total}],"total":{total}}}\n```')
    question = request.prompt.split("Question: ", 1)[1].split("\n", 1)[0]
    return Text(f"Answer to: {question}")


def openai_params(tmp_path: Path, url: str, **overrides: Any) -> dict[str, Any]:
    """WildTrace on the sample data, every role an OpenAI-compatible endpoint on ``url``."""
    params: dict[str, Any] = {
        "benchmark": "wildtrace", "run_name": "t", "output_dir": str(tmp_path / "run"),
        "data": str(SAMPLE / "tasks.json"), "corpus": str(SAMPLE / "corpus"),
        "concurrency": 4,
        "model": {"provider": "openai", "name": "contestant-x", "base_url": f"{url}/v1",
                  "caps": {"en": 50000, "cjk": 20000}},
        "judges": [{"provider": "openai", "name": f"judge-{i}", "base_url": f"{url}/v1"}
                   for i in (1, 2, 3)],
        "retry": dict(FAST_RETRY),
    }
    for key, value in overrides.items():
        params[key] = value
    return copy.deepcopy(params)


def offline_params(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    params = openai_params(tmp_path, "http://unused", **overrides)
    params["model"] = {"provider": "offline", "name": "extractive-bm25",
                       "caps": {"en": 50000, "cjk": 20000}}
    params["judges"] = [{"provider": "offline", "name": n}
                        for n in ("rubric-overlap", "rubric-overlap-strict", "rubric-overlap-lenient")]
    params.update(overrides)
    return params


def is_figure(output: Any) -> bool:
    """An evalnb figure's output: a ``text/html`` ``<figure class="evalnb-figure">``, its PNG inside."""
    return '<figure class="evalnb-figure">' in "".join((output.get("data") or {}).get("text/html", ""))


def figure_outputs(notebook: Any) -> list[Any]:
    """The outputs of an executed notebook that are evalnb figures, in cell order."""
    return [o for c in notebook["cells"] if c["cell_type"] == "code" for o in c.get("outputs", []) if is_figure(o)]


def shown_size(figure: Any) -> dict[str, int]:
    """The width and height a figure output's ``<img>`` is shown at (CSS pixels)."""
    import re

    found = re.search(r'<img [^>]*width="(\d+)" height="(\d+)"', "".join(figure["data"]["text/html"]))
    assert found, figure["data"]["text/html"][:300]
    return {"width": int(found.group(1)), "height": int(found.group(2))}


def embedded_pngs(text: str) -> list[bytes]:
    """Every base64 PNG embedded in ``text`` (a notebook's JSON, a page), decoded."""
    import base64
    import re

    return [base64.b64decode(m) for m in re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)]


def sample_tasks() -> list[dict[str, Any]]:
    return json.loads((SAMPLE / "tasks.json").read_text("utf-8"))["tasks"]


@dataclass(frozen=True)
class DemoOutputs:
    """One `evalnb demo` of the session (tests/test_notebooks.py, tests/test_publication.py):
    its folder, exit code, and what it and its kernels printed (``out``, ``err``, as a capture
    fixture's ``readouterr()`` gives them). Tests read it, and write nothing into it."""

    dir: Path
    code: int
    out: str
    err: str

    @property
    def printed(self) -> str:
        return self.err + self.out


@pytest.fixture(scope="session")
def demo_outputs(tmp_path_factory: pytest.TempPathFactory) -> DemoOutputs:
    """`evalnb demo` run once for the session (a minute or two): a non-inline backend inherited by
    the kernels, quota ledgers of its own, and what the demo and its kernels print (their file
    descriptors, and Python's streams: standard output and error apart) kept for the tests."""
    import contextlib
    import os
    import sys

    from evalnb.app.main import main

    out = tmp_path_factory.mktemp("demo")
    logs = tmp_path_factory.mktemp("demo-log")
    with pytest.MonkeyPatch.context() as patch, open(logs / "out.txt", "w+", encoding="utf-8") as out_sink, \
            open(logs / "err.txt", "w+", encoding="utf-8") as err_sink:
        patch.setenv("MPLBACKEND", "Agg")
        patch.setenv("EVALNB_QUOTA_DIR", str(logs / "quota-ledgers"))
        saved = os.dup(1), os.dup(2)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out_sink.fileno(), 1)
        os.dup2(err_sink.fileno(), 2)
        try:
            with contextlib.redirect_stdout(out_sink), contextlib.redirect_stderr(err_sink):
                code = main(["demo", "--outputs", str(out)])
        finally:
            out_sink.flush()
            err_sink.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
    return DemoOutputs(out, code, (logs / "out.txt").read_text("utf-8"), (logs / "err.txt").read_text("utf-8"))
