"""Parameters: secrets refused, overrides, types checked with the key named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import evalnb
from evalnb.config import apply_sets, find_secrets
from evalnb.core.errors import ConfigError
from tests.conftest import offline_params


@pytest.mark.parametrize("params, where", [
    ({"model": {"api_key": "abc"}}, "model.api_key"),
    ({"judges": [{"token": "abc"}]}, "judges[0].token"),
    ({"model": {"openai_secret": "x"}}, "model.openai_secret"),
    ({"model": {"base_url": "https://h/v1?k=sk-" + "abcdefghijklmnopqrstuvwx"}}, "model.base_url"),
    ({"note": "AIza" + "SyA1234567890abcdefghijklmnopqrstu"}, "note"),
])
def test_secret_shaped_parameters_are_found(params: dict, where: str) -> None:
    assert find_secrets(params) == [where]


def test_ordinary_parameters_are_not_secrets() -> None:
    assert find_secrets({"model": {"api_key_env": "OPENAI_API_KEY", "token_param": "max_tokens",
                                   "max_tokens": 5, "api_key": None}}) == []


def test_open_run_refuses_a_key_in_parameters(tmp_path: Path) -> None:
    params = offline_params(tmp_path)
    params["model"]["api_key"] = "sk-" + "live-0123456789abcdefghij"
    with pytest.raises(ConfigError, match="refusing parameters that hold a key value .*model.api_key"):
        evalnb.open_run(params)
    assert not (tmp_path / "run").exists()


def test_set_overrides_dotted_keys_with_yaml_values() -> None:
    out = apply_sets({"model": {"name": "a", "reasoning": False}},
                     ["model.reasoning=true", "concurrency=8", "model.caps={en: 5, cjk: 2}"])
    assert out == {"model": {"name": "a", "reasoning": True, "caps": {"en": 5, "cjk": 2}},
                   "concurrency": 8}


@pytest.mark.parametrize("change, message", [
    ({"concurrency": "16"}, "concurrency: expected a positive integer"),
    ({"model": {"provider": "offline", "name": "extractive-bm25", "reasoning": "yes"}},
     "model.reasoning: expected true or false"),
    ({"model": {"provider": "nope", "name": "m"}}, "model.provider: 'nope' is not one of"),
    ({"model": {"provider": "offline", "name": "extractive-bm25", "temprature": 0.1}},
     "model: unknown key"),
    ({"judges": []}, "judges: wildtrace needs at least one judge"),
    ({"model": {"provider": "offline", "name": "extractive-bm25", "caps": {"en": 5}}},
     r"model.caps: expected \{en: N, cjk: N\}"),
    ({"model": {"provider": "offline", "name": "extractive-bm25", "api_key_env": "sk key"}},
     "model.api_key_env: expected the NAME of an environment variable"),
    ({"benchmark": "mmlu"}, "benchmark: 'mmlu' is not one of"),
])
def test_bad_parameters_name_the_key(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        evalnb.open_run(offline_params(tmp_path, **change))


def test_relative_paths_in_a_file_are_relative_to_the_file(tmp_path: Path) -> None:
    params = offline_params(tmp_path)
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "tasks.json").write_text(Path(params["data"]).read_text())
    params["data"] = "tasks.json"
    params["output_dir"] = "out"
    (folder / "p.json").write_text(json.dumps(params))
    run = evalnb.open_run(folder / "p.json")
    assert run.config.data == folder / "tasks.json"
    assert run.config.output_dir == folder / "out"


def test_missing_key_variable_is_a_config_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVALNB_TEST_UNSET_KEY", raising=False)
    params = offline_params(tmp_path)
    params["model"] = {"provider": "openai", "name": "m", "base_url": "http://127.0.0.1:9/v1",
                       "api_key_env": "EVALNB_TEST_UNSET_KEY"}
    run = evalnb.open_run(params)
    with pytest.raises(ConfigError, match="model.api_key_env: environment variable EVALNB_TEST_UNSET_KEY is not set"):
        evalnb.generate(run)


def test_cli_checks_key_variables_before_writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from evalnb.app.main import main
    monkeypatch.delenv("EVALNB_TEST_UNSET_KEY", raising=False)
    params = offline_params(tmp_path)
    params["judges"][1] = {"provider": "openai", "name": "j", "api_key_env": "EVALNB_TEST_UNSET_KEY"}
    (tmp_path / "p.json").write_text(json.dumps(params))
    assert main(["run", str(tmp_path / "p.json")]) == 1
    assert "judges[1].api_key_env: environment variable EVALNB_TEST_UNSET_KEY is not set" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
