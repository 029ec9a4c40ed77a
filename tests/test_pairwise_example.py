"""The pairwise example ``examples/pairwise_qa`` against the fake server: each answer judged
against the baseline's in both orders; the win rate and consistency equal a hand computation
from this file's verdict table, and its interval this file's own bootstrap."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalnb.pipeline import run as opening, stages as pipeline
from tests.conftest import FAST_RETRY, ROOT
from tests.fakeserver import FakeLLMServer, RecordedRequest, Text

SOURCE = ROOT / "examples" / "pairwise_qa"
N_BOOT, SEED = 2000, 0
# The judge's verdict, by position, when the contestant is A (game 1) and when it is B (game 2).
VERDICTS = {"p1": ("[[A>>B]]", "[[B>A]]"), "p2": ("[[A>B]]", "[[A>B]]"),   # p2: position bias, inconsistent
            "p3": ("[[A=B]]", "[[A=B]]"), "p4": ("[[B>A]]", "[[A>>B]]")}
# The same from the contestant's side: win 1, tie 0.5, loss 0.
WINS = {"p1": (1.0, 1.0), "p2": (1.0, 0.0), "p3": (0.5, 0.5), "p4": (0.0, 0.0)}


def questions() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (SOURCE / "questions.jsonl").read_text().splitlines() if line.strip()]


def responder(request: RecordedRequest) -> Text:
    if request.model == "contestant":
        return Text("contestant's answer to: " + request.prompt)
    item = next(q["id"] for q in questions() if f"Question: {q['question']}\n" in request.prompt)
    first = re.search(r"\[Answer A\]\n(.*)\n", request.prompt)
    assert first
    return Text(VERDICTS[item][0 if first[1].startswith("contestant's answer") else 1])


@pytest.fixture
def on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    example = Path(shutil.copytree(SOURCE, tmp_path / "pairwise_qa", ignore=shutil.ignore_patterns("__pycache__")))
    monkeypatch.syspath_prepend(str(example))
    return example


def test_win_rate_against_the_baseline_in_both_orders(tmp_path: Path, on_path: Path) -> None:
    with FakeLLMServer() as server:
        server.responder = responder
        run = opening.open_run({
            "benchmark": "pairwise_qa_bench:PairwiseQA", "run_name": "pw", "output_dir": str(tmp_path / "pw"),
            "data": str(SOURCE / "questions.jsonl"), "concurrency": 8,
            "model": {"provider": "openai", "name": "contestant", "base_url": f"{server.url}/v1"},
            "judges": [{"provider": "openai", "name": "judge", "base_url": f"{server.url}/v1"}],
            "retry": dict(FAST_RETRY), "n_boot": N_BOOT, "seed": SEED})
        pipeline.generate(run)
        pipeline.judge(run)
        pipeline.aggregate(run)
        judged = [r for r in server.requests if r.model == "judge"]
    assert len(judged) == 2 * len(questions())
    scores = json.loads((run.dir / "scores.json").read_text())
    items = [sum(WINS[q["id"]]) / 2 for q in questions()]
    win = scores["metrics"]["win_rate"]
    assert win["value"] == pytest.approx(np.mean(items)) == pytest.approx((2 + 1 + 1 + 0) / 8)
    draws = np.random.default_rng(SEED).integers(0, len(items), size=(N_BOOT, len(items)))
    low, high = np.quantile(np.asarray(items)[draws].mean(axis=1), [0.025, 0.975])
    assert (win["ci"]["low"], win["ci"]["high"]) == pytest.approx((low, high))
    assert scores["metrics"]["consistency"]["value"] == pytest.approx(3 / 4)
