"""Labels and hints that are true: a run with no contestant model is named by what answered,
and `status` gives the one command that resumes this very directory."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from evalnb.app.main import main
from tests.conftest import offline_params


def file_fed_run(tmp_path: Path, benchmark: str, option: str, file: str, name: str = "none") -> Path:
    run = tmp_path / "run dir"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({
        "benchmark": benchmark, "run_name": "scored", "output_dir": str(run), "data": "cases.json",
        option: f"answers/{file}", "model": {"provider": "none", "name": name}, "judges": []}), "utf-8")
    return run


@pytest.mark.parametrize(("benchmark", "option", "file"), [("geoktools", "predictions", "preds.jsonl"),
                                                         ("geoexpertqueries", "traces", "traces.jsonl")])
def test_a_run_without_a_model_is_labelled_by_its_answers_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], benchmark: str, option: str, file: str) -> None:
    run = file_fed_run(tmp_path, benchmark, option, file)
    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    assert "none:none" not in out
    assert f"model: answers from {file};" in out


def test_a_named_model_behind_a_file_keeps_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = file_fed_run(tmp_path, "geoktools", "predictions", "preds.jsonl", name="agent-7")
    assert main(["status", str(run)]) == 0
    assert "model: agent-7;" in capsys.readouterr().out


def test_status_names_the_command_that_resumes_this_directory(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    run = file_fed_run(tmp_path, "geoktools", "predictions", "preds.jsonl")
    assert main(["status", str(run)]) == 0
    nexts = [line for line in capsys.readouterr().out.splitlines() if line.startswith("next:")]
    assert nexts == [f"next: `evalnb run {shlex.quote(str(run / 'config.json'))}` resumes, makes no call, "
                     "and aggregates"]


def test_the_recorded_parameters_are_the_run_they_record_with_its_set_options(tmp_path: Path) -> None:
    """`evalnb run RUN_DIR/config.json` resumes the same directory with the same parameters,
    however the run was started: config.json (what a run records) read back as a parameters
    file resolves to what the parameters file and its --set options resolved to."""
    from evalnb.pipeline.run import load_config

    params = offline_params(tmp_path)
    del params["output_dir"]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(params), "utf-8")
    config, _ = load_config(tmp_path / "p.yaml", ["run_name=other", "seed=3"])
    recorded = tmp_path / "elsewhere" / "config.json"
    recorded.parent.mkdir()
    recorded.write_text(json.dumps(config.to_dict()), "utf-8")
    again, _ = load_config(recorded)
    assert again.output_dir == config.output_dir and again.output_dir.name == "other"
    assert again.to_dict() == config.to_dict()


@pytest.mark.parametrize(("code", "how"), [(-15, "by SIGTERM"), (-9, "by SIGKILL"), (-2, "by SIGINT"),
                                           (130, "(Ctrl-C)")])
def test_a_suite_contestant_stopped_by_a_signal_is_interrupted_with_the_command_that_resumes(
        tmp_path: Path, code: int, how: str) -> None:
    from evalnb.app.suite.command import interrupted_cause

    cause = interrupted_cause(code, tmp_path / "my suite.yaml")
    assert cause == (f"interrupted {how}: what it recorded is kept; `evalnb suite '{tmp_path}/my suite.yaml'` "
                     "resumes it")
    said = cause.split("`")[0]   # before the command, which names a path
    assert "exit" not in said and str(code) not in said


@pytest.mark.parametrize("code", [0, 1, 2])
def test_an_ordinary_exit_is_not_called_interrupted(tmp_path: Path, code: int) -> None:
    from evalnb.app.suite.command import interrupted_cause

    assert interrupted_cause(code, tmp_path / "s.yaml") is None


def unlisted_params(tmp_path: Path) -> Path:
    """Offline WildTrace whose contestant is in no caps table and given no caps: the default row."""
    params = offline_params(tmp_path)
    params["model"] = {"provider": "offline", "name": "extractive-bm25"}
    path = tmp_path / "unlisted.yaml"
    path.write_text(yaml.safe_dump(params), "utf-8")
    return path


def default_cap_warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("WARNING") and "probe-window" in line
            and "extractive-bm25" in line]


@pytest.mark.parametrize("command", ["estimate", "prompt"])
def test_the_default_cap_warning_reaches_the_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    from tests.conftest import sample_tasks

    path = unlisted_params(tmp_path)
    argv = [command, str(path)] + ([sample_tasks()[0]["task_id"]] if command == "prompt" else [])
    assert main(["-q", *argv]) == 0   # quiet too: a warning is not chatter
    assert len(default_cap_warnings(capsys.readouterr().err)) == 1


def test_a_suites_default_cap_warning_names_its_contestant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = offline_params(tmp_path)
    del params["output_dir"], params["run_name"]
    params["model"] = {"provider": "offline"}
    suite = {"suite_name": "board", "output_dir": str(tmp_path / "suite"), **params,
             "contestants": [{"run_name": "a", "model": {"name": "extractive-bm25"}},
                             {"run_name": "b", "model": {"name": "extractive-bm25", "caps": {"en": 50000, "cjk": 20000}}}]}
    path = tmp_path / "suite.json"
    path.write_text(json.dumps(suite), "utf-8")
    assert main(["estimate", str(path)]) == 0
    warned = default_cap_warnings(capsys.readouterr().err)
    assert len(warned) == 1 and warned[0].startswith("WARNING: a: ")


def error_lines(err: str) -> list[str]:
    return [line.removeprefix("evalnb: error: ") for line in err.strip().splitlines()]


def test_every_unknown_key_of_a_parameters_file_is_reported_at_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    params = offline_params(tmp_path)
    params["concurency"], params["sed"] = 3, 1
    params["model"]["bse_url"] = "http://x"
    params["judges"][1]["nmae"] = "y"
    params["retry"]["max_retris"] = 2
    path = tmp_path / "typos.yaml"
    path.write_text(yaml.safe_dump(params), "utf-8")
    for command in ("run", "estimate"):
        assert main([command, str(path)]) == 1
        lines = error_lines(capsys.readouterr().err)
        assert [line.split(": ")[1] for line in lines] == ["unknown parameter(s) concurency (did you mean concurrency?), "
                                                           "sed (did you mean seed?)", "model", "judges[1]", "retry"], lines
        assert all(line.startswith(f"{path}: ") for line in lines)
        assert "bse_url (did you mean base_url?)" in lines[1] and "nmae (did you mean name?)" in lines[2]
        assert "max_retris (did you mean max_retries?)" in lines[3]


@pytest.mark.parametrize("key", ["data", "corpus"])
def test_run_estimate_and_prompt_word_a_missing_input_alike(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str) -> None:
    params = offline_params(tmp_path)
    params[key] = str(tmp_path / "nowhere")
    path = tmp_path / "missing.yaml"
    path.write_text(yaml.safe_dump(params), "utf-8")
    said = {}
    for argv in (["run", str(path)], ["estimate", str(path)], ["prompt", str(path), "any-item"]):
        assert main(argv) == 1
        said[argv[0]] = error_lines(capsys.readouterr().err)
    assert said["run"] == said["estimate"] == said["prompt"]
    [line] = said["run"]
    assert line.startswith(f"{path}: {key}: {tmp_path / 'nowhere'} not found (expected a ")
