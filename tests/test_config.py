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
    ({"options": {"secret": "x"}}, "options.secret"),   # a credential's name, whatever its value
    ({"model": {"base_url": "https://h/v1?k=sk-" + "abcdefghijklmnopqrstuvwx"}}, "model.base_url"),
    ({"note": "AIza" + "SyA1234567890abcdefghijklmnopqrstu"}, "note"),
])
def test_secret_shaped_parameters_are_found(params: dict, where: str) -> None:
    assert find_secrets(params) == [where]


def test_ordinary_parameters_are_not_secrets() -> None:
    assert find_secrets({"model": {"api_key_env": "OPENAI_API_KEY", "token_param": "max_tokens",
                                   "max_tokens": 5, "api_key": None}}) == []
    # Names that only contain a credential's word are read by their values.
    assert find_secrets({"max_token": 64, "judge_max_tokens": 5, "sort_key": "id", "openai_secret": "x"}) == []


@pytest.mark.parametrize("benchmark, typo, meant", [("geoktools", "judge_max_token", "judge_max_tokens"),
                                                    ("wildtrace", "max_token", None)])
def test_a_typo_with_token_in_it_is_an_unknown_parameter_not_a_secret(
        tmp_path: Path, benchmark: str, typo: str, meant: str | None) -> None:
    """`max_token: 64` is a misspelt parameter: said so (with the closest key when there is one)
    before any key-value check, which looks at values."""
    from tests.test_edges_messages import geoktools
    params = geoktools(**{typo: 64}) if benchmark == "geoktools" else offline_params(tmp_path, **{typo: 64})
    with pytest.raises(ConfigError) as refused:
        evalnb.open_run(params | {"output_dir": str(tmp_path / "out")})
    assert f"unknown parameter(s) {typo}" in str(refused.value)
    assert (f"(did you mean {meant}?)" in str(refused.value)) if meant else "did you mean" not in str(refused.value)
    assert "key value" not in str(refused.value) and not (tmp_path / "out").exists()


def test_a_plugin_option_max_token_suggests_max_tokens(tmp_path: Path) -> None:
    from evalnb.config import resolve
    params = offline_params(tmp_path, max_token=64)
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) max_token \(did you mean max_tokens\?\)"):
        resolve(params, {"max_tokens": 64}, base=tmp_path, source="p.yaml")


def test_unknown_keys_come_before_the_key_value_check(tmp_path: Path) -> None:
    """A misspelt key beside a key-shaped value: the typo first (neither message shows the value)."""
    params = offline_params(tmp_path, concurency=4)
    params["model"]["base_url"] = "https://h/v1?k=sk-" + "abcdefghijklmnopqrstuvwx"
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) concurency \(did you mean concurrency\?\)"):
        evalnb.open_run(params)
    del params["concurency"]
    params["model"]["timeuot"] = "sk-" + "abcdefghijklmnopqrstuvwx"   # an endpoint's typo, its value a key
    with pytest.raises(ConfigError, match=r"model: unknown key\(s\) timeuot \(did you mean timeout\?\)") as refused:
        evalnb.open_run(params)
    assert "abcdefghijklmnop" not in str(refused.value)


def test_open_run_refuses_a_key_in_parameters(tmp_path: Path) -> None:
    params = offline_params(tmp_path)
    params["model"]["api_key"] = "sk-" + "live-0123456789abcdefghij"   # no such key: unknown, and said where a key goes
    with pytest.raises(ConfigError, match="model: unknown key.*api_key.*put it in an environment variable") as refused:
        evalnb.open_run(params)
    assert "0123456789" not in str(refused.value)
    params["model"]["base_url"] = params["model"].pop("api_key")   # a known key holding a key value
    with pytest.raises(ConfigError, match="refusing parameters that hold a key value .*model.base_url"):
        evalnb.open_run(params)
    assert not (tmp_path / "run").exists()


def test_set_indexes_lists() -> None:
    """`--set judges.0.base_url=...` and `--set judges.2={...}`."""
    params = {"judges": [{"name": "a", "base_url": "x"}, {"name": "b"}, {"name": "c"}], "model": {"name": "m"}}
    out = apply_sets(params, ["judges.0.base_url=http://h:1/v1", "judges.2={provider: offline, name: d}",
                              "judges.1.caps.en=5"])
    assert out["judges"] == [{"name": "a", "base_url": "http://h:1/v1"}, {"name": "b", "caps": {"en": 5}},
                             {"provider": "offline", "name": "d"}]
    assert params["judges"][0]["base_url"] == "x" and params["judges"][1] == {"name": "b"}   # the input kept


@pytest.mark.parametrize("item, message", [
    ("judges.3.name=x", "--set judges.3.name: judges has 3 entries (indices 0 to 2); index 3 is out of range: "
                        "to add one, set the whole list (judges=[...])"),
    ("judges.name=x", "--set judges.name: judges is a list: give an entry's index, e.g. judges.0 (indices 0 to 2)"),
    ("concurrency.0=1", "--set concurrency.0: concurrency is 16, not a mapping or a list: nothing in it to set"),
    ("model.name.0=x", "--set model.name.0: model.name is 'm', not a mapping or a list"),
    ("judges.0..name=x", "--set 'judges.0..name=x': expected KEY=VALUE with a dotted KEY"),
])
def test_set_refuses_an_index_it_cannot_follow(item: str, message: str) -> None:
    params = {"judges": [{"name": "a"}, {"name": "b"}, {"name": "c"}], "model": {"name": "m"}, "concurrency": 16}
    with pytest.raises(ConfigError) as refused:
        apply_sets(params, [item])
    assert str(refused.value).startswith(message), str(refused.value)


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
