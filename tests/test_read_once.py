"""Each thing once: a store parsed once per stage pass and per ``evalnb status``, one read-only
reader of a store's latest lines, a suite contestant's fingerprint computed once and checked by
the resume check ``evalnb run`` makes.

The counts come from spies that wrap the real functions (``parse_store``, ``run_fingerprint``)
and count their calls; what the commands do is checked on their real output.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import evalnb
from evalnb.app.inspection.status import run_status
from evalnb.app.suite import config as suite_config
from evalnb.app.suite.config import load_suite
from evalnb.core.errors import ConfigError
from evalnb.records import stores
from evalnb.records.fingerprint import check_or_record, run_fingerprint
from evalnb.records.stores import JsonlStore, latest_records
from tests.conftest import offline_params
from tests.test_suite import contestant, write_suite


def count_parses(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the real ``parse_store``, by store file name."""
    counts: Counter[str] = Counter()
    real = stores.parse_store

    def spy(path: Path) -> Any:
        counts[path.name] += 1
        return real(path)

    monkeypatch.setattr(stores, "parse_store", spy)
    return counts




def test_each_stage_pass_parses_each_store_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    params = offline_params(tmp_path)
    for stage in (evalnb.generate, evalnb.judge, evalnb.aggregate):   # passes that make every call
        run = evalnb.open_run(params)
        counts = count_parses(monkeypatch)
        stage(run)
        monkeypatch.undo()
        assert counts and set(counts.values()) == {1}, (stage.__name__, counts)
    run_dir = tmp_path / "run"
    assert json.loads((run_dir / "status.json").read_text())["state"] == "complete"
    generated = len(latest_records(run_dir / "generate.jsonl"))
    for stage in (evalnb.generate, evalnb.judge):   # passes with nothing left to do
        run = evalnb.open_run(params)
        counts = count_parses(monkeypatch)
        stage(run)
        monkeypatch.undo()
        assert counts["generate.jsonl"] == 1 and set(counts.values()) == {1}, (stage.__name__, counts)
    assert len(latest_records(run_dir / "generate.jsonl")) == generated   # nothing redone


def test_status_parses_each_store_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = evalnb.open_run(offline_params(tmp_path))
    evalnb.generate(run)
    evalnb.judge(run)
    evalnb.aggregate(run)
    counts = count_parses(monkeypatch)
    text = run_status(tmp_path / "run")
    assert counts == Counter({"generate.jsonl": 1, "judge.jsonl": 1}), counts
    calls = {line.split()[0]: line.split()[1] for line in text.splitlines()
             if line.strip().startswith(("generate ", "judge "))}
    assert calls == {"generate": "12/12", "judge": "30/30"}, text   # counts and totals from the one read


def test_the_read_only_reader_keeps_endpoint_failures_skips_damage_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "generate.jsonl"
    lines = [{"key": "a", "status": "failed_transient"}, {"key": "a", "status": "ok"},
             {"key": "b", "status": "failed_endpoint"}]
    path.write_text("\n".join(json.dumps(r) for r in lines) + '\n{"key": "c", "sta', "utf-8")
    before = path.read_bytes()
    assert latest_records(path) == {"a": lines[1], "b": lines[2]}   # the torn last line skipped
    assert path.read_bytes() == before   # not healed: another process may be writing it
    assert JsonlStore(path).load() == {"a": lines[1]}   # the writer's loader: heals, leaves endpoint failures out
    assert not path.read_bytes().endswith(b'"sta')


def test_a_store_reads_another_writers_lines(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    mine, other = JsonlStore(path), JsonlStore(path)
    mine.append({"key": "a", "status": "ok"})
    assert set(mine.load()) == {"a"}
    other.append({"key": "b", "status": "ok"})
    mine.append({"key": "c", "status": "ok"})
    assert set(mine.load()) == {"a", "b", "c"}   # the file changed under it: parsed again


def test_a_suite_computes_each_contestants_fingerprint_once_and_uses_the_resume_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts: Counter[str] = Counter()
    real = suite_config.run_fingerprint

    def spy(config: Any, benchmark: Any) -> Any:
        counts[config.run_name] += 1
        return real(config, benchmark)

    path = write_suite(tmp_path, "http://127.0.0.1:9", [contestant("a"), contestant("b")])
    suite = load_suite(path, require_keys=False)
    first = {c.name: c for c in suite.contestants}["a"]
    recorded = first.dir / "fingerprint.json"
    first.dir.mkdir(parents=True)
    recorded.write_text(json.dumps(run_fingerprint(first.config, first.benchmark)), "utf-8")   # a has run before
    monkeypatch.setattr(suite_config, "run_fingerprint", spy)
    load_suite(path, require_keys=False)
    assert counts == Counter({"a": 1, "b": 1})
    changed = write_suite(tmp_path, "http://127.0.0.1:9", [contestant("a", caps={"en": 40000, "cjk": 20000}),
                                                           contestant("b")])
    with pytest.raises(ConfigError, match=r"contestant a: changed since its run started .*\n.*caps"):
        load_suite(changed, require_keys=False)
    assert not (suite.contestants[1].dir / "fingerprint.json").exists()   # the check wrote nothing


def test_the_read_only_resume_check_writes_nothing(tmp_path: Path) -> None:
    fp = {"sha256": "x", "parts": {}}
    assert check_or_record(tmp_path / "fingerprint.json", fp, record=False) is fp
    assert not (tmp_path / "fingerprint.json").exists()
    assert check_or_record(tmp_path / "fingerprint.json", fp) is fp
    assert (tmp_path / "fingerprint.json").exists()
