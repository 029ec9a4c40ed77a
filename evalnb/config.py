"""Run parameters: read, checked, resolved to one secret-free dictionary.

A parameters file is YAML or JSON. Relative paths in a file are relative to that file;
paths given with ``--set`` or in a dictionary are relative to the current directory.
``output_dir`` defaults to ``outputs/<run_name>`` under the current directory. The resolved
dictionary is what papermill injects into every stage notebook, so it must never hold a
secret: keys live in environment variables that the parameters only name.

One job, parameters file in and checked configuration out, kept in one module on purpose: each
check below is a step of :func:`resolve` and words its error the same way (the file, the key,
what was expected, the closest known key), so a reader who wants to know why a file is refused
reads one module top to bottom.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import yaml

from evalnb.core.errors import ConfigError
from evalnb.core.overrides import apply_sets  # noqa: F401  (--set: evalnb.config.apply_sets for every caller)
from evalnb.core.run_config import EndpointConfig, QuietDefault, RunConfig
from evalnb.core.subset import check_subset
from evalnb.core.cache_options import check_cache
from evalnb.core.types import RetryPolicy
from evalnb.core.redaction import SECRET_NAME, SECRET_VALUE
from evalnb.providers import BATCH_PROVIDERS, PROVIDERS, REGISTRY, STREAMING_PROVIDERS

MODES = ("live", "batch")
RESEND = ("batch", "live")
BATCH_OPTION_KEYS = frozenset({"resend", "max_requests", "max_bytes", "inline_max_bytes"})
NO_MODEL = {"provider": "none", "name": "none"}   # answers come from a file (predictions, traces)
COMMON_KEYS = ("benchmark", "run_name", "output_dir", "data", "corpus", "concurrency",
               "model", "judges", "retry", "prices", "budget", "subset", "judge_retest", "cache")
PATH_KEYS = ("output_dir", "data", "corpus")
PRICE_KEYS = frozenset({"input", "output", "batch_input", "batch_output"})
RATE_LIMIT_KEYS = frozenset({"requests_per_minute", "input_tokens_per_minute",
                             "output_tokens_per_minute", "window_seconds"})

def find_secrets(value: Any, path: str = "") -> list[str]:
    """Where a parameter holds a key itself: a key-shaped value anywhere, or a value under a
    name that is a credential's and nothing else (``api_key``, ``token``, ``password``). A
    name that only contains such a word (``max_token``) is no reason: the unknown-key check,
    which runs first (:func:`check_known_keys`), says what it is."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            where = f"{path}.{k}" if path else str(k)
            if SECRET_NAME.search(str(k)) and v not in (None, ""):
                found.append(where)
            else:
                found.extend(find_secrets(v, where))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found.extend(find_secrets(v, f"{path}[{i}]"))
    elif isinstance(value, str) and SECRET_VALUE.search(value):
        found.append(path)
    return found


def read_params_file(path: Path) -> dict[str, Any]:
    if path.is_dir():   # `evalnb run params`: name the files it holds, not errno 21
        found = sorted(p.name for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
        shown = ", ".join(found[:4]) + (", ..." if len(found) > 4 else "")
        raise ConfigError(f"{path}: a folder, not a parameters file; give one file"
                          + (f" (it holds {shown})" if found else ""))
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: parameters file not found") from None
    except (OSError, UnicodeDecodeError) as e:   # unreadable: one line, not a traceback
        raise ConfigError(f"{path}: cannot read the parameters file ({getattr(e, 'strerror', None) or e})") from None
    try:
        params = yaml.safe_load(text)   # JSON is YAML too
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f", line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}{where}: not valid YAML/JSON ({getattr(e, 'problem', e)})") from None
    except ValueError as e:   # PyYAML builds dates itself: `2026-02-30` fails outside YAMLError
        raise ConfigError(f"{path}: not valid YAML/JSON ({e})") from None
    if not isinstance(params, dict):
        raise ConfigError(f"{path}: expected a mapping of parameters at the top level")
    return params


def absolutise(params: dict[str, Any], keys: Sequence[str], base: Path) -> dict[str, Any]:
    """Relative paths made absolute against ``base``; a list of paths (one per run) too."""
    def fix(value: Any) -> Any:
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            return str((base / value).resolve())
        return value
    out = dict(params)
    for key in keys:
        if key in out:
            value = out[key]
            out[key] = [fix(v) for v in value] if isinstance(value, list) else fix(value)
    return out


def closest(key: str, known: Iterable[str]) -> str:
    """`` (did you mean X?)`` for a misspelt key, or nothing when no known key is close."""
    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    return f" (did you mean {match[0]}?)" if match else ""


def unknown_keys(unknown: Sequence[str], known: Iterable[str]) -> str:
    """``concurency (did you mean concurrency?)``, for each unknown key; a credential's name
    (``api_key``) also says where a key goes (never its value: none is shown)."""
    known = sorted(known)
    text = ", ".join(f"{k}{closest(str(k), known)}" for k in unknown)
    if any(SECRET_NAME.search(str(k)) for k in unknown):
        text += ("; a key is never a parameter: put it in an environment variable and name that "
                 "variable with api_key_env")
    return text


ENDPOINT_KEYS = frozenset(f.name for f in fields(EndpointConfig)) - {"role"}


def check_known_keys(params: Mapping[str, Any], known: Iterable[str], source: str) -> None:
    """Every key is one evalnb knows, at the top level and in each endpoint and ``retry``:
    checked before anything else, so a misspelt key is called that (with the closest known
    key), not a key value or a type error. Unknown keys are named, their values never shown."""
    known = set(known)
    problems = []   # every unknown key of the file at once, one line each: one edit fixes them all
    if unknown := sorted(set(params) - known, key=str):
        problems.append(f"unknown parameter(s) {unknown_keys(unknown, known)}")
    judges = params.get("judges")
    endpoints = [("model", params.get("model")),
                 *((f"judges[{i}]", j) for i, j in enumerate(judges if isinstance(judges, list) else []))]
    for role, raw in endpoints:
        if isinstance(raw, Mapping) and (unknown := sorted(set(raw) - ENDPOINT_KEYS, key=str)):
            problems.append(f"{role}: unknown key(s) {unknown_keys(unknown, ENDPOINT_KEYS)}; "
                            f"known: {', '.join(sorted(ENDPOINT_KEYS))}")
    retry, retry_keys = params.get("retry"), {f.name for f in fields(RetryPolicy)}
    if isinstance(retry, Mapping) and (unknown := sorted(set(retry) - retry_keys, key=str)):
        problems.append(f"retry: unknown key(s) {unknown_keys(unknown, retry_keys)}")
    if problems:
        raise ConfigError("\n".join(f"{source}: {problem}" for problem in problems))


def plain_json(value: Any, key: str, source: str) -> Any:
    """``value`` with YAML dates as ISO strings; refused if anything else is not JSON.

    The resolved parameters are written to config.json and injected by papermill, so every
    value must survive JSON; checking here means nothing is written before they are known to.
    """
    if isinstance(value, (dt.date, dt.datetime)):   # `rating_date: 2026-03-14` unquoted
        return value.isoformat()
    if isinstance(value, Mapping):
        return {(k.isoformat() if isinstance(k, dt.date) else k): plain_json(v, f"{key}.{k}", source)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v, f"{key}[{i}]", source) for i, v in enumerate(value)]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ConfigError(f"{source}: {key}: {type(value).__name__} is not a JSON value")


def absolutise_commands(params: dict[str, Any], base: Path) -> dict[str, Any]:
    """In a parameters file, command arguments starting with ./ or ../ are relative to it."""
    def fix(endpoint: Any) -> Any:
        if not isinstance(endpoint, dict) or not isinstance(endpoint.get("command"), list):
            return endpoint
        argv = [str((base / a).resolve()) if isinstance(a, str) and a.startswith(("./", "../")) else a
                for a in endpoint["command"]]
        return endpoint | {"command": argv}
    out = dict(params)
    if "model" in out:
        out["model"] = fix(out["model"])
    if isinstance(out.get("judges"), list):
        out["judges"] = [fix(j) for j in out["judges"]]
    return out


def _endpoint(raw: Any, role: str, default_concurrency: int, source: str) -> EndpointConfig:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: {role}: expected a mapping with provider and name")
    for key in ("provider", "name"):   # its keys are known (check_known_keys)
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ConfigError(f"{source}: {role}.{key}: required, a non-empty string")
    if raw["provider"] not in PROVIDERS:
        raise ConfigError(f"{source}: {role}.provider: {raw['provider']!r} is not one of "
                          f"{', '.join(PROVIDERS)}{closest(str(raw['provider']), PROVIDERS)}")
    endpoint = EndpointConfig(**raw, role=role)
    _check_types(endpoint, f"{source}: {role}")
    if endpoint.command and endpoint.command[0] == "python":
        # "python" means the interpreter running evalnb, whatever PATH holds.
        endpoint = replace(endpoint, command=[sys.executable, *endpoint.command[1:]])
    if endpoint.concurrency is None:
        endpoint = replace(endpoint, concurrency=default_concurrency)
    return endpoint


def _check_types(e: EndpointConfig, role: str) -> None:
    def bad(key: str, what: str) -> ConfigError:
        return ConfigError(f"{role}.{key}: expected {what}, got {getattr(e, key)!r}")
    for key in ("reasoning", "send_temperature", "approximation", "strip_think"):
        if not isinstance(getattr(e, key), bool):
            raise bad(key, "true or false")
    for key in ("timeout", "stream_idle_timeout", "max_call_seconds"):
        value = getattr(e, key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise bad(key, "a positive number of seconds")
    if not (e.stream == "auto" or isinstance(e.stream, bool)):
        raise bad("stream", "auto, true or false")
    for key, default in (("stream", "auto"), ("strip_think", False)):
        if e.provider not in STREAMING_PROVIDERS and getattr(e, key) != default:
            raise bad(key, f"it unset on a {e.provider} endpoint (only {', '.join(STREAMING_PROVIDERS)} "
                           "endpoints have it)")
    if e.concurrency is not None and (not isinstance(e.concurrency, int) or e.concurrency < 1):
        raise bad("concurrency", "a positive integer")
    if e.caps is not None:
        if (not isinstance(e.caps, Mapping) or set(e.caps) != {"en", "cjk"}
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in e.caps.values())):
            raise bad("caps", "{en: N, cjk: N} with positive integer character counts")
    if e.token_param not in ("max_tokens", "max_completion_tokens"):
        raise bad("token_param", "max_tokens or max_completion_tokens")
    if e.provider == "command" and (not isinstance(e.command, list) or not e.command
                                    or not all(isinstance(a, str) for a in e.command)):
        raise bad("command", "a non-empty list of strings (argv; no shell)")
    if e.env is not None and (not isinstance(e.env, list) or not all(
            isinstance(v, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v) for v in e.env)):
        raise bad("env", "a list of environment variable NAMES")
    if e.rate_limit is not None and (not isinstance(e.rate_limit, Mapping) or not e.rate_limit
                                     or set(e.rate_limit) - RATE_LIMIT_KEYS or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in e.rate_limit.values())):
        raise bad("rate_limit", "a mapping of positive numbers with keys among "
                  + ", ".join(sorted(RATE_LIMIT_KEYS)))
    for key in ("base_url", "api_key_env", "api_version", "family"):
        if getattr(e, key) is not None and not isinstance(getattr(e, key), str):
            raise bad(key, "a string")
    if e.api_key_env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", e.api_key_env):
        raise bad("api_key_env", "the NAME of an environment variable (never the key itself)")
    check_batch(e.mode, e.batch, e.provider, role)


def _retry(raw: Any, source: str) -> RetryPolicy:
    if raw is None:
        return RetryPolicy()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: retry: expected a mapping")
    policy = RetryPolicy(**raw)   # its keys are known (check_known_keys)
    if not isinstance(policy.max_retries, int) or isinstance(policy.max_retries, bool) or policy.max_retries < 0:
        raise ConfigError(f"{source}: retry.max_retries: expected a non-negative integer")
    for key in ("base_delay", "max_delay", "retry_after_cap"):
        value = getattr(policy, key)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{source}: retry.{key}: expected a non-negative number of seconds, got {value!r}")
    return policy


def check_batch(mode: Any, options: Any, provider: str, where: str) -> None:
    """Refuse a batch configuration the engine could not honour, naming the key."""
    if mode not in MODES:
        raise ConfigError(f"{where}.mode: expected live or batch, got {mode!r}")
    if mode == "batch" and provider not in BATCH_PROVIDERS:
        raise ConfigError(f"{where}.mode: batch needs provider {' or '.join(BATCH_PROVIDERS)}, not {provider!r}")
    if options is None:
        return
    if not isinstance(options, Mapping) or set(options) - BATCH_OPTION_KEYS:
        raise ConfigError(f"{where}.batch: expected a mapping with keys among {', '.join(sorted(BATCH_OPTION_KEYS))}, "
                          f"got {options!r}")
    if options.get("resend", "batch") not in RESEND:
        raise ConfigError(f"{where}.batch.resend: expected batch or live, got {options.get('resend')!r}")
    for key in ("max_requests", "max_bytes", "inline_max_bytes"):
        value = options.get(key)
        minimum = 0 if key == "inline_max_bytes" else 1
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < minimum):
            raise ConfigError(f"{where}.batch.{key}: expected a {'non-negative' if minimum == 0 else 'positive'} "
                              f"integer, got {value!r}")


def check_budget(raw: Any, source: str) -> dict[str, Any] | None:
    """``budget: {max_cost_usd: N}``; ``suite: {name, max_cost_usd, ledger}`` is what
    ``evalnb suite`` adds for its ceiling over all its runs (evalnb.app.suite.command)."""
    if raw is None:
        return None
    def usd(value: Any, key: str) -> float:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"{source}: {key}: expected a non-negative number of US dollars, got {value!r}")
        return float(value)
    if not isinstance(raw, Mapping) or not raw or set(raw) - {"max_cost_usd", "suite"}:
        raise ConfigError(f"{source}: budget: expected {{max_cost_usd: USD}}, got {raw!r}")
    budget: dict[str, Any] = {}
    if "max_cost_usd" in raw:
        budget["max_cost_usd"] = usd(raw["max_cost_usd"], "budget.max_cost_usd")
    suite = raw.get("suite")
    if suite is not None:
        if not isinstance(suite, Mapping) or set(suite) != {"name", "max_cost_usd", "ledger"}:
            raise ConfigError(f"{source}: budget.suite: expected {{name, max_cost_usd, ledger}} (written by evalnb suite)")
        budget["suite"] = {"name": str(suite["name"]), "ledger": str(suite["ledger"]),
                           "max_cost_usd": usd(suite["max_cost_usd"], "budget.suite.max_cost_usd")}
    return budget


def check_judge_retest(raw: Any, source: str, judges: int) -> dict[str, int] | None:
    """``judge_retest: {sample: M, repeats: K, seed: S}`` (evalnb.judges.retest): M answers
    judged K more times by every judge; seed 0 unless given."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not {"sample", "repeats"} <= set(raw) <= {"sample", "repeats", "seed"}:
        raise ConfigError(f"{source}: judge_retest: expected {{sample: M, repeats: K}} (seed optional), got {raw!r}")
    for key in ("sample", "repeats", "seed"):
        value = raw.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or (key != "seed" and value < 1):
            raise ConfigError(f"{source}: judge_retest.{key}: expected a {'positive ' if key != 'seed' else ''}"
                              f"integer, got {value!r}")
    if not judges:
        raise ConfigError(f"{source}: judge_retest: the run has no judges to retest")
    return {"sample": raw["sample"], "repeats": raw["repeats"], "seed": raw.get("seed", 0)}


def check_priced(config: RunConfig) -> None:
    """Under a ceiling every model whose calls cost money has a price: a ceiling that counted an
    unpriced model as free would be no ceiling."""
    for endpoint in (config.model, *config.judges):
        if REGISTRY[endpoint.provider].costs and endpoint.name not in config.prices:
            raise ConfigError(f"{config.source}: prices: {endpoint.role} model {endpoint.name!r} has no price; "
                              "under a budget every model whose calls cost money needs one "
                              f"(prices: {{{endpoint.name}: {{input: USD, output: USD}}}} per million tokens)")


def resolve(params: Mapping[str, Any], option_defaults: Mapping[str, Any], *, base: Path,
            source: str) -> RunConfig:
    """Check ``params`` (already absolutised where they came from a file) into a RunConfig.

    In this order: unknown keys (named, with the closest known key), then values shaped like a
    key (before any message could show a value), then each value's type and range."""
    check_known_keys(params, (*COMMON_KEYS, *option_defaults), source)
    secrets = find_secrets(params)
    if secrets:
        raise ConfigError(f"{source}: refusing parameters that hold a key value ({', '.join(secrets)}); "
                          "put the key in an environment variable and name it with api_key_env")
    params = {k: plain_json(v, str(k), source) for k, v in params.items()}
    run_name = params.get("run_name")
    if not isinstance(run_name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", run_name):
        raise ConfigError(f"{source}: run_name: required, letters, digits, '.', '_' or '-'")
    concurrency = params.get("concurrency", 16)
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise ConfigError(f"{source}: concurrency: expected a positive integer, got {concurrency!r}")
    if not isinstance(params.get("data"), str):
        raise ConfigError(f"{source}: data: required, the path of the data file")
    judges_raw = params.get("judges") or []
    if not isinstance(judges_raw, list):
        raise ConfigError(f"{source}: judges: expected a list")
    prices = params.get("prices") or {}
    if not isinstance(prices, Mapping) or not all(
            isinstance(p, Mapping) and {"input", "output"} <= set(p) <= PRICE_KEYS
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in p.values())
            for p in prices.values()):
        raise ConfigError(f"{source}: prices: expected MODEL: {{input: USD, output: USD}} per "
                          "million tokens for each model (batch_input, batch_output optional: the batch "
                          "price, half the live price when absent)")

    def path(value: Any) -> Path:
        p = Path(str(value)).expanduser()
        return p if p.is_absolute() else (base / p).resolve()

    corpus = path(params["corpus"]) if params.get("corpus") else None
    options = {k: params.get(k, default) for k, default in option_defaults.items()
               if not (isinstance(default, QuietDefault) and default.is_default(params.get(k, default.value)))}
    config = RunConfig(
        benchmark=str(params["benchmark"]), run_name=run_name,
        output_dir=path(params.get("output_dir") or Path("outputs") / run_name),
        data=path(params["data"]),
        corpus=corpus, concurrency=concurrency,
        model=_endpoint(params.get("model") or NO_MODEL, "model", concurrency, source),
        judges=tuple(_endpoint(j, f"judges[{i}]", concurrency, source) for i, j in enumerate(judges_raw)),
        retry=_retry(params.get("retry"), source), prices=dict(prices), options=options, source=source,
        budget=check_budget(params.get("budget"), source),
        subset=check_subset(params.get("subset"), source),
        judge_retest=check_judge_retest(params.get("judge_retest"), source, len(judges_raw)),
        cache=check_cache(params.get("cache"), source, ["model", *(f"judge{i}" for i in range(1, len(judges_raw) + 1))]),
    )
    if config.budget:
        check_priced(config)
    json.dumps(config.to_dict())   # cannot fail now (plain_json); a failure here is a bug, not input
    return config
