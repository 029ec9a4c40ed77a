"""A stage's calls against the fake server with the command's live progress on this process's
stderr (a pseudo-terminal or a pipe, as the test attaches it): the runner, the progress
channel and the view, as ``evalnb run`` chains them, without the kernel in between.

``python -m tests.progress_child RUN_DIR``: WildTrace's generation stage on the sample data,
the contestant paced to 6 requests a second (so calls wait for their quota window) and its
first reply a 500 (so one call is retried).

``python -m tests.progress_child RUN_DIR --offline``: the shipped demo's generation and judge
stages (the extractive baseline and the three offline judges: no call reaches a model)."""

from __future__ import annotations

import sys
from pathlib import Path

from evalnb.app.live import live_progress
from evalnb.pipeline.run import open_run
from evalnb.pipeline.stages import generate, judge
from tests.conftest import ROOT, deterministic_responder, openai_params
from tests.fakeserver import Error, FakeLLMServer


def main(run_dir: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        server.queue(Error(500))
        params = openai_params(run_dir.parent, server.url, output_dir=str(run_dir))
        params["model"]["rate_limit"] = {"requests_per_minute": 6, "window_seconds": 1}
        with live_progress():
            generate(open_run(params))
        print(f"SERVER-REQUESTS {server.count()}", file=sys.stderr)


def offline(run_dir: Path) -> None:
    with live_progress():
        run = open_run(ROOT / "params" / "demo_wildtrace.yaml", [f"output_dir={run_dir}"])
        generate(run)
        judge(run)


if __name__ == "__main__":
    (offline if sys.argv[2:] == ["--offline"] else main)(Path(sys.argv[1]))
