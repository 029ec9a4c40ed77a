"""Configuration errors at the edges: each names the parameters file and the key,
an unknown key suggests the closest valid one, and nothing is written first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import evalnb
from evalnb.core.errors import ConfigError
from tests.conftest import offline_params
from tests.test_geoexpertqueries import DATA as GEQ_DATA
from tests.test_geoktools import DATA as GK_DATA


def write(tmp_path: Path, params: dict) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params | {"output_dir": "out"}, allow_unicode=True))
    return path


def refused(path: Path, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        evalnb.open_run(path)
    assert str(error.value).startswith(f"{path}: {message}"), str(error.value)
    assert not (path.parent / "out").exists()


def wildtrace(tmp_path: Path, **change: object) -> dict:
    return offline_params(tmp_path, **change)


def geoktools(**change: object) -> dict:
    return {"benchmark": "geoktools", "run_name": "gk", "data": str(GK_DATA / "cases.json"),
            "predictions": str(GK_DATA / "predictions.jsonl"), **change}


def geoexpertqueries(**change: object) -> dict:
    return {"benchmark": "geoexpertqueries", "run_name": "geq", "data": str(GEQ_DATA / "queries.json"),
            "traces": str(GEQ_DATA / "traces.jsonl"), "rating_date": "2026-03-14",
            "judges": [{"provider": "offline", "name": "rubric-overlap"}], **change}


@pytest.mark.parametrize("typo, meant", [("concurency", "concurrency"), ("judge", "judges"),
                                         ("run_nam", "run_name")])
def test_unknown_parameter_suggests_the_closest(tmp_path: Path, typo: str, meant: str) -> None:
    params = wildtrace(tmp_path)
    params[typo] = params.pop(meant) if meant in params else 4
    refused(write(tmp_path, params), f"unknown parameter(s) {typo} (did you mean {meant}?)")


def test_unknown_benchmark_option_suggests_the_closest(tmp_path: Path) -> None:
    refused(write(tmp_path, geoktools(prediction="p.jsonl")), "unknown parameter(s) prediction (did you mean predictions?)")
    refused(write(tmp_path, geoexpertqueries(rating_dates="2026-03-14")),
            "unknown parameter(s) rating_dates (did you mean rating_date?)")


def test_a_folder_given_as_the_parameters_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`evalnb run params` (a folder): one line naming the folder and what it holds, no errno."""
    from evalnb.app.main import main
    folder = tmp_path / "params"
    folder.mkdir()
    write(folder, wildtrace(tmp_path))
    assert main(["run", str(folder)]) == 1
    err = capsys.readouterr().err
    assert err == f"evalnb: error: {folder}: a folder, not a parameters file; give one file (it holds params.yaml)\n"


def test_a_key_nothing_resembles_gets_no_guess(tmp_path: Path) -> None:
    path = write(tmp_path, wildtrace(tmp_path, zebra=1))
    with pytest.raises(ConfigError, match=re.escape(f"{path}: unknown parameter(s) zebra")) as error:
        evalnb.open_run(path)
    assert "did you mean" not in str(error.value)


@pytest.mark.parametrize("model, message", [
    ({"provider": "offline", "name": "extractive-bm25", "base_ulr": "http://x"},
     "model: unknown key(s) base_ulr (did you mean base_url?); known: "),
    ({"provider": "opnai", "name": "m"}, "model.provider: 'opnai' is not one of "),
    ({"provider": "offline"}, "model.name: required, a non-empty string"),
    ({"provider": "offline", "name": "extractive-bm25", "timeout": -1}, "model.timeout: expected a positive number"),
])
def test_endpoint_errors_name_the_file(tmp_path: Path, model: dict, message: str) -> None:
    refused(write(tmp_path, wildtrace(tmp_path, model=model)), message)


def test_provider_typo_suggests_the_provider(tmp_path: Path) -> None:
    path = write(tmp_path, wildtrace(tmp_path, model={"provider": "opnai", "name": "m"}))
    with pytest.raises(ConfigError, match=r"\(did you mean openai\?\)"):
        evalnb.open_run(path)


@pytest.mark.parametrize("retry, message", [
    ({"max_retry": 2}, "retry: unknown key(s) max_retry (did you mean max_retries?)"),
    ({"base_delay": "1s"}, "retry.base_delay: expected a non-negative number of seconds, got '1s'"),
    ({"max_retries": True}, "retry.max_retries: expected a non-negative integer"),
])
def test_retry_errors_name_the_file(tmp_path: Path, retry: dict, message: str) -> None:
    refused(write(tmp_path, wildtrace(tmp_path, retry=retry)), message)


@pytest.mark.parametrize("params, message", [
    (geoktools(scorer="lm"), "scorer: expected deterministic or llm, got 'lm'"),
    (geoktools(n_boot=0), "n_boot: expected a positive integer, got 0"),
    (geoktools(seed="zero"), "seed: expected an integer, got 'zero'"),
    (geoktools(scorer="llm"), "judges: the llm scorer uses exactly one judge"),
    (geoktools(predictions=None), "predictions: required unless a model answers the queries"),
    (geoktools(predictions=[]), "predictions: expected a file, or a list of files (one per agent run), got []"),
    (geoktools(predictions=7), "predictions: expected a file, or a list of files"),
    (geoktools(predictions="nowhere.jsonl"), "predictions: "),
    (geoktools(scorer="llm", judges=[{"provider": "offline", "name": "rubric-overlap"}],
               judge_prompt_file="nowhere.txt"), "judge_prompt_file: prompt file not found: "),
    (geoexpertqueries(traces=None), "traces: required"),
    (geoexpertqueries(prompt_variant="flow"), "prompt_variant: expected one of tool_agnostic, workflow"),
    (geoexpertqueries(judges=[]), "judges: the autorater is exactly one judge"),
    (geoexpertqueries(num_runs=0), "num_runs: expected a positive integer, got 0"),
    (geoexpertqueries(available_tools="all"), "available_tools: expected a list"),
    (geoexpertqueries(prompt_file="nowhere.txt"), "prompt_file: prompt file not found: "),
    (geoexpertqueries(likert_file="nowhere.json"), "likert_file: prompt file not found: "),
])
def test_benchmark_errors_name_the_file_and_key(tmp_path: Path, params: dict, message: str) -> None:
    refused(write(tmp_path, params), message)


def test_bad_likert_file_names_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "likert.json").write_text('{"0": 0, "1": 0.5}')
    refused(write(tmp_path, geoexpertqueries(likert_file="likert.json")),
            f"likert_file: {tmp_path / 'likert.json'}: expected ")
    (tmp_path / "likert.json").write_text("0 -> 0")
    refused(write(tmp_path, geoexpertqueries(likert_file="likert.json")),
            f"likert_file: {tmp_path / 'likert.json'} is not JSON")


def test_a_value_json_cannot_hold_is_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(geoktools(), allow_unicode=True) + "output_dir: out\nseed: !!binary aGVsbG8=\n")
    refused(path, "seed: bytes is not a JSON value")


def test_a_yaml_date_in_any_parameter_arrives_as_its_iso_string(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    params = geoktools()
    del params["run_name"]
    path.write_text(yaml.safe_dump(params, allow_unicode=True) + "output_dir: out\nrun_name: 2026-03-14\n")
    run = evalnb.open_run(path)
    assert run.config.run_name == "2026-03-14" and run.config.output_dir == tmp_path / "out"


def test_an_unset_key_variable_names_the_parameters_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALNB_EDGE_UNSET_KEY", raising=False)
    params = wildtrace(tmp_path)
    params["judges"][0] = {"provider": "openai", "name": "j", "api_key_env": "EVALNB_EDGE_UNSET_KEY"}
    path = write(tmp_path, params)
    with pytest.raises(ConfigError) as error:
        evalnb.open_run(path, require_keys=True)
    assert str(error.value).startswith(f"{path}: judges[0].api_key_env: environment variable "
                                       "EVALNB_EDGE_UNSET_KEY is not set")
    assert not (tmp_path / "out").exists()


def test_wildtrace_without_judges_names_the_parameters_file(tmp_path: Path) -> None:
    path = write(tmp_path, wildtrace(tmp_path, judges=[]))
    refused(path, "judges: wildtrace needs at least one judge")


def test_a_judge_reply_with_a_huge_integer_is_not_json_rather_than_a_crash() -> None:
    from evalnb.core.replies import embedded_json
    huge = "9" * 5000
    assert embedded_json(f'{{"total": {huge}}} then {{"total": 40}}', "{") == [{"total": 40}]
    assert embedded_json("[" * 100_000 + "]" * 100_000 + ' {"total": 1}', "{") == [{"total": 1}]
