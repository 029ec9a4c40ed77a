"""A stage is done only when it finished: a run stopped (Ctrl-C or a kill) while a stage's
notebook runs is shown as interrupted in that stage, is refused by ``compare``, ``render`` and
``pack``, leaves no empty file, and the same command completes it to the numbers, tables and
figures of a run never interrupted. The offline demo benchmark: no endpoint, small data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from evalnb.app.runs.notebooks import PROJECT

EVALNB = str(Path(sys.executable).parent / "evalnb")
PARAMS = str(PROJECT / "params" / "demo_wildtrace.yaml")
TIMEOUT = 180.0


def evalnb(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([EVALNB, *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)


def run_args(out: Path) -> list[str]:
    return ["run", PARAMS, "--set", f"output_dir={out}"]


def record_of(run: Path) -> dict[str, object]:
    """What must not depend on an interruption: the numbers, the tables, the figures' bytes."""
    scores = json.loads((run / "scores.json").read_text())
    scores["config"].pop("output_dir")   # where each run is
    answers = json.loads((run / "responses.json").read_text())["records"]
    return {"scores": {k: v for k, v in scores.items() if k != "latency"},   # latency: the calls' own times
            "answers": [{k: v for k, v in r.items() if k not in ("started_at", "elapsed_s")} for r in answers],
            "status": json.loads((run / "status.json").read_text())["state"],
            "figures": {p.name: p.read_bytes() for p in sorted((run / "figures").iterdir())}}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    where = tmp_path_factory.mktemp("reference")
    done = evalnb(*run_args(where / "run"), cwd=where)
    assert done.returncode == 0, done.stderr[-2000:]
    return record_of(where / "run")


def stage_state(run: Path, stage: str) -> str | None:
    try:
        return (json.loads((run / "manifest.json").read_text()).get("notebooks") or {}).get(stage, {}).get("state")
    except (OSError, ValueError):
        return None


def stop_inside(out: Path, stage: str, sig: signal.Signals, cwd: Path, when: Callable[[], bool] | None = None) -> int:
    """Start the run and send ``sig`` as soon as ``stage``'s notebook has begun (or ``when``
    holds)."""
    proc = subprocess.Popen([EVALNB, *run_args(out)], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + TIMEOUT
    while not (when() if when else stage_state(out, stage) == "running"):
        assert proc.poll() is None, f"the run ended before {stage} began"
        assert time.monotonic() < deadline, f"{stage} never began"
        time.sleep(0.002)
    os.killpg(proc.pid, sig)
    return proc.wait(timeout=TIMEOUT)


def completed_again(out: Path, cwd: Path, reference: dict[str, object]) -> None:
    """The same command completes the run to the uninterrupted record; no file empty."""
    again = evalnb(*run_args(out), cwd=cwd)
    assert again.returncode == 0, again.stderr[-2000:]
    assert record_of(out) == reference
    states = json.loads((out / "manifest.json").read_text())["notebooks"]
    assert {s: e["state"] for s, e in states.items()} == dict.fromkeys(states, "complete")
    assert "nothing remains" in evalnb("status", str(out), cwd=cwd).stdout
    assert [p for p in out.rglob("*") if p.is_file() and p.stat().st_size == 0] == []
    assert not list(out.rglob("*.tmp"))


@pytest.mark.parametrize("stage, sig", [
    ("generate", signal.SIGINT), ("judge", signal.SIGINT), ("aggregate", signal.SIGINT),
    ("report", signal.SIGINT), ("generate", signal.SIGKILL), ("report", signal.SIGKILL)])
def test_a_stopped_stage_is_interrupted_refused_and_redone(tmp_path: Path, reference: dict[str, object],
                                                            stage: str, sig: signal.Signals) -> None:
    out = tmp_path / "run"
    code = stop_inside(out, stage, sig, tmp_path)
    assert code != 0

    status = evalnb("status", str(out), cwd=tmp_path)
    assert f"the {stage} stage did not finish" in status.stdout, status.stdout
    assert "config.json" in status.stdout.rsplit("next:", 1)[1]
    assert stage_state(out, stage) in ("running", "interrupted")
    for command in (["render", str(out)], ["pack", str(out), "--out", str(tmp_path / "run.tar.gz")],
                    ["compare", str(out), str(out), "--out", str(tmp_path / "cmp")]):
        refused = evalnb(*command, cwd=tmp_path)
        assert refused.returncode != 0 and f"the {stage} stage did not finish" in refused.stderr, refused.stderr
        assert len([ln for ln in refused.stderr.splitlines() if ln.strip()]) == 1, refused.stderr
    assert not (tmp_path / "run.tar.gz").exists() and not (out / "paper").exists()
    empty = [p for p in out.rglob("*") if p.is_file() and p.stat().st_size == 0 and not p.name.endswith(".tmp")]
    assert empty == [], empty

    completed_again(out, tmp_path, reference)


@pytest.mark.soak
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
@pytest.mark.parametrize("moment", ["generate executed", "judge executed", "aggregate executed",
                                    "report executed", "figures"])
def test_a_run_stopped_at_a_boundary_or_while_figures_are_written_completes(
        tmp_path: Path, reference: dict[str, object], moment: str, sig: signal.Signals) -> None:
    """Stopped once a stage's notebook ended (before its HTML), or once the report began writing
    figures: nothing empty is left, and the same command completes the run."""
    out = tmp_path / "run"
    stage, _, state = moment.partition(" ")
    if moment == "figures":
        stop_inside(out, "report", sig, tmp_path, when=lambda: any((out / "figures").glob("*")))
    else:
        stop_inside(out, stage, sig, tmp_path, when=lambda: stage_state(out, stage) == state)
    # A writer killed mid-write may leave its temporary file (the next run removes it): never
    # an empty or half-written file under a record's own name.
    assert [p for p in out.rglob("*") if p.is_file() and p.stat().st_size == 0 and not p.name.endswith(".tmp")] == []
    completed_again(out, tmp_path, reference)
