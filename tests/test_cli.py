"""The command line's conventions, none of which starts a kernel: usage errors, help, estimate's
table, live progress on a terminal and in a pipe, subsets, ``evalnb prompt`` against what the
fake server receives, the compare folder check, lock files. (Runs through the stage kernel:
tests/test_cli_runs.py.)"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalnb.app.main import main
from evalnb.app.parser import build_parser
from evalnb.core.errors import ConfigError
from tests.conftest import ROOT, deterministic_responder, openai_params
from tests.fakeserver import FakeLLMServer

DEMO = ROOT / "params" / "demo_wildtrace.yaml"
STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d evalnb: ")


# --- conventions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [["run", "--bogus", "p.yaml"], ["run"], ["run", "p.yaml", "--stage", "judgee"],
                                  ["runn"], [], ["run", "p.yaml", "--limit", "0"],
                                  ["run", "p.yaml", "--limit", "2", "--items", "a"]])
def test_a_usage_error_exits_1_never_2_with_argparse_message_and_a_pointer_to_help(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1   # 2 means "resumable": a wrapper retrying on it would loop on a typo
    err = capsys.readouterr().err
    assert "error:" in err and "--help' for more" in err and "Traceback" not in err


def test_version_and_help_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"evalnb {__version__}"
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    for code in ("0 ", "1 ", "2 ", "130"):
        assert re.search(rf"^  {code}", text, re.M), code
    assert "resumable" in text and "``" not in text and ":mod:" not in text


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_subcommand_has_a_description_an_example_and_every_argument_explained() -> None:
    for name, sub in _subparsers(build_parser()).items():
        assert sub.description and "example:\n  evalnb " + name in sub.description, name
        assert "``" not in sub.description and ":func:" not in sub.description, name
        for action in sub._actions:
            assert action.help and action.help != argparse.SUPPRESS, f"{name}: {action.dest} unexplained"


def test_quiet_and_verbose_are_taken_before_or_after_the_command() -> None:
    parser = build_parser()
    assert parser.parse_args(["-q", "status", "x"]).verbosity == 0
    assert parser.parse_args(["status", "x", "-v"]).verbosity == 2
    assert parser.parse_args(["status", "x"]).verbosity == 1


# --- estimate ------------------------------------------------------------------------------------

def test_estimate_fits_100_columns_says_free_for_offline_and_no_price_for_unpriced_apis(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", str(DEMO), "--set", f"output_dir={tmp_path / 'run'}"]) == 0
    captured = capsys.readouterr()
    assert "WARNING" not in captured.err   # a run's warnings are said once, as it starts
    lines = captured.out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert "None" not in captured.out and "some model has no price" not in captured.out
    rows = [line.split() for line in lines[1:5]]
    assert [r[0] for r in rows] == ["generate", "judge", "judge", "judge"] and all(r[-1] == "free" for r in rows)
    assert rows[0][3] == "12"   # calls

    params = tmp_path / "api.json"
    params.write_text(json.dumps(openai_params(tmp_path, "http://127.0.0.1:9")))
    assert main(["estimate", str(params), "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "no price" in wide and "batch cost (max)" in wide and "free" not in wide


def test_estimate_with_limit_and_items_counts_only_those_items(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "run")
    assert main(["estimate", str(DEMO), "--set", f"output_dir={out}", "--limit", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[3] == "3"
    assert main(["estimate", str(DEMO), "--set", f"output_dir={out}", "--items", "wt-sample-05,wt-sample-02"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[3] == "2"
    assert main(["estimate", str(DEMO), "--set", f"output_dir={out}", "--items", "wt-sample-02,nope"]) == 1
    assert "subset: item(s) not in the data: nope" in capsys.readouterr().err


# --- subsets -------------------------------------------------------------------------------------

def test_a_subset_is_the_data_files_first_items_or_the_named_ones_in_file_order() -> None:
    from evalnb.core.subset import check_subset, select, suffix

    ids = ["a", "b", "c", "d"]
    assert select(ids, {"limit": 2}, ids, "p") == ["a", "b"]
    assert select(ids, check_subset({"items": ["d", "b"]}, "p"), ids, "p") == ["b", "d"]
    assert suffix({"limit": 5}) == "limit5"
    assert suffix(check_subset({"items": ["d", "b"]}, "p") or {}) == suffix(check_subset({"items": ["b", "d"]}, "p") or {})
    assert re.fullmatch(r"items-[0-9a-f]{8}", suffix({"items": ["b"]}))
    for bad in ({"limit": 0}, {"limit": True}, {"items": []}, {"limit": 2, "items": ["a"]}, 3):
        with pytest.raises(ConfigError, match="subset: expected"):
            check_subset(bad, "p")


def test_limit_and_items_give_the_run_a_name_and_directory_of_its_own(tmp_path: Path) -> None:
    from evalnb.app.runs.subset import subset_sets
    from evalnb.pipeline.run import load_config

    base = [f"output_dir={tmp_path / 'runs' / 'demo'}"]
    config, _ = load_config(DEMO, subset_sets(DEMO, base, 5, None))
    assert (config.run_name, config.output_dir, config.subset) == \
        ("demo-wildtrace-limit5", tmp_path / "runs" / "demo-limit5", {"limit": 5})
    config, _ = load_config(DEMO, subset_sets(DEMO, base, None, ["wt-sample-02"]))
    assert config.output_dir.name.startswith("demo-items-") and config.subset == {"items": ["wt-sample-02"]}
    assert subset_sets(DEMO, base, None, None) == base


# --- live progress -------------------------------------------------------------------------------

def test_progress_on_a_terminal_and_in_a_pipe(tmp_path: Path) -> None:
    """The same stage (paced so that calls wait for their quota window, one call retried) with
    stderr a pseudo-terminal and a pipe, side by side: a bar drawn in place on the one,
    timestamped lines at a bounded rate on the other."""
    from evalnb.app.live import LINE_SECONDS, STEPS

    started = time.monotonic()
    text, err = on_a_terminal_and_in_a_pipe(tmp_path)
    elapsed = time.monotonic() - started

    assert "\r" in text and not any(STAMPED.match(line) for line in text.splitlines())
    draws = text.split("\r")
    assert any("12/12" in d and "ok 11" in d for d in draws), text[-600:]
    assert any("retry backoff" in d or "1 retry" in d for d in draws) and any("quota" in d for d in draws), text
    assert re.search(r"12/12 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+(call/s|s/call)", text), text[-600:]   # calls to a model: a rate

    text = err.decode()
    assert "\r" not in text and "\x1b" not in text
    lines = [line for line in text.splitlines() if STAMPED.match(line)]
    # A start line, one per tenth passed, the end line, and at most one per 30 s besides.
    assert 2 <= len(lines) <= STEPS + 2 + elapsed / LINE_SECONDS
    assert "generate: 0/12 calls (0%)" in lines[0]
    final = lines[-1]
    assert "generate: done: 12/12 calls (100%), ok 11, failed 0, out_of_context 1" in final
    assert "1 retry" in final and re.search(r"\d+ quota waits?", final), final
    assert "SERVER-REQUESTS 12" in text   # 11 calls (one out of context), one of them retried


def on_a_terminal_and_in_a_pipe(tmp_path: Path, *args: str) -> tuple[str, bytes]:
    """``tests.progress_child`` (with ``args``) run twice at once, its stderr a pseudo-terminal
    and a pipe: what each showed."""
    def start(run: str, stderr: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "tests.progress_child", str(tmp_path / run), *args], cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)

    master, slave = pty.openpty()
    on_terminal = start("tty", slave)
    os.close(slave)
    in_pipe = start("pipe", subprocess.PIPE)
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:   # until the child closes the terminal
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:   # EIO: the child has exited
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    _, err = in_pipe.communicate(timeout=120)
    assert on_terminal.wait(timeout=30) == 0 and in_pipe.returncode == 0, err
    return seen.decode("utf-8", "replace"), err


def test_an_offline_stage_shows_no_rate(tmp_path: Path) -> None:
    """The shipped demo's stages (no call reaches a model) on a terminal and in a pipe: counts
    and the time taken, never a rate (thousands of "calls" a second) or a time left."""
    text, err = on_a_terminal_and_in_a_pipe(tmp_path, "--offline")
    draws = [d for d in text.split("\r") if "/" in d]
    assert any(re.search(r"generate: 100%\|\S+\| 12/12 \[\d\d:\d\d, ok 10, failed 0", d) for d in draws), text[-600:]
    assert any(re.search(r"judge: 100%\|\S+\| 30/30 \[\d\d:\d\d, ok 30, failed 0", d) for d in draws), text[-600:]
    assert not re.search(r"call/s|s/call|it/s|\d<\d|\?<", text), text[-600:]
    lines = [line for line in err.decode().splitlines() if STAMPED.match(line)]
    assert any("generate: done: 12/12 calls (100%), ok 10" in line for line in lines), lines
    assert lines and not any("calls/s" in line or "left ~" in line for line in lines), lines
    # A line in the middle of a stage (one this fast finishes first): a rate only for calls to a model.
    from evalnb.app.live import progress_text
    from evalnb.views.progress_channel import Snapshot

    halfway = Snapshot("judge", total=30, statuses={"ok": 15}, started=100.0, at=101.0)
    assert "15.00 calls/s, elapsed 00:01, left ~00:01" in progress_text(halfway)
    halfway.offline = True
    assert progress_text(halfway) == "15/30 calls (50%), ok 15, failed 0, elapsed 00:01"


# --- evalnb prompt -------------------------------------------------------------------------------

def test_prompt_is_byte_for_byte_what_the_server_receives(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.pipeline.run import open_run
    from evalnb.pipeline.stages import generate, judge

    with FakeLLMServer() as server:
        server.responder = deterministic_responder
        params = openai_params(tmp_path, server.url, subset={"items": ["wt-sample-03"]})
        path = tmp_path / "p.json"
        path.write_text(json.dumps(params))

        assert main(["prompt", str(path), "wt-sample-03", "--json", "--role", "judge2"]) == 0
        before = json.loads(capsys.readouterr().out)["requests"]
        assert before[0]["on_placeholder_answer"] and "not recorded yet" in before[0]["request"]["prompt"]

        run = open_run(params)
        generate(run)
        assert main(["prompt", str(path), "wt-sample-03", "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)["requests"]
        judge(run)
        assert server.count() == 4 and len(shown) == 4   # the answer, then three verdicts
        received = {r.model: r for r in server.requests}
        for entry in shown:
            request = received[entry["route"]]
            assert request.body["messages"][-1]["content"] == entry["request"]["prompt"]   # byte for byte
            assert request.body["max_tokens"] == entry["request"]["max_tokens"]
            assert request.body.get("temperature") == entry["request"]["temperature"]
            assert (request.body["messages"][0]["content"] if len(request.body["messages"]) > 1 else None) \
                == entry["request"]["system"]
            assert entry["provider"] == "openai" and entry["base_url"] == f"{server.url}/v1"
        assert not any(e.get("on_placeholder_answer") for e in shown)
        assert main(["prompt", str(path), "wt-sample-03"]) == 0
        text = capsys.readouterr().out
        assert text.count("=== ") == 4 and received["contestant-x"].prompt in text


# --- compare's folder, lock files ---------------------------------------------------------------

def test_compare_refuses_a_folder_it_did_not_write_and_another_comparison_by_default(tmp_path: Path) -> None:
    from evalnb.app.record.compare import check_out

    runs = [tmp_path / "a", tmp_path / "b"]
    check_out(tmp_path / "new", runs, chosen=False)
    (tmp_path / "empty").mkdir()
    check_out(tmp_path / "empty", runs, chosen=False)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not written by evalnb compare"):
        check_out(mine, runs, chosen=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "compare.json").write_text(json.dumps({"runs": [{"dir": str(tmp_path / "c")}]}))
    with pytest.raises(ConfigError, match="holds a comparison of other runs"):
        check_out(other, runs, chosen=False)
    check_out(other, runs, chosen=True)   # --out named it: replaced
    (other / "compare.json").write_text(json.dumps({"runs": [{"dir": str(r)} for r in runs]}))
    check_out(other, runs, chosen=False)   # the same runs again


def test_a_released_lock_leaves_no_file(tmp_path: Path) -> None:
    from evalnb.records import lock

    held = lock.acquire(tmp_path)
    assert (tmp_path / lock.LOCK_NAME).exists()
    held.release()
    assert not (tmp_path / lock.LOCK_NAME).exists()
    with lock.holding(tmp_path, "test"):
        pass
    assert not list(tmp_path.iterdir())
    again = lock.acquire(tmp_path)   # taken again after the file went away
    again.release()


def test_status_of_a_folder_that_holds_no_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", str(tmp_path)]) == 0
    assert "not a run directory (no config.json): nothing has been recorded here" in capsys.readouterr().out
    assert main(["status", str(tmp_path / "missing")]) == 1


def test_a_runs_warnings_are_said_once_as_it_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.pipeline.run import open_run

    params = openai_params(tmp_path, "http://127.0.0.1:9")
    del params["model"]["caps"]   # a model the caps table does not list: a warning
    first = open_run(params, prefetch_sdks=False)
    assert first.warnings and capsys.readouterr().err.count("WARNING: ") == len(first.warnings)
    again = open_run(params, prefetch_sdks=False)
    assert again.warnings == first.warnings and "WARNING" not in capsys.readouterr().err
    assert again.summary().loc["warning"].size   # still shown where the run is looked at
