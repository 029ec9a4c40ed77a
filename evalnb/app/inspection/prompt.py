"""``evalnb prompt PARAMS ITEM``: the exact requests an item's calls would send, making none.

For the contestant: the request its generation call prepares (the document read, the cap
applied, the prompt filled), as the runner would hand it to the provider. For each judge: its
request on the item's answer as recorded in the run directory, when there is one; otherwise on
a placeholder answer (said so), since the real prompt embeds an answer not yet made. A later
turn of a conversation whose earlier answer is not recorded is shown the same way: its history
holds the placeholder, and the calls it awaits are named.

Each request is shown with the endpoint it goes to (provider, base URL, the model name as sent:
the route), its settings (output budget and the parameter that carries it, temperature or none
sent, system text, response schema, whether it streams), the conversation's earlier turns where
it has any, and the prompt verbatim; with ``--json``
as one JSON document, whose ``prompt`` strings are byte for byte what the server receives as the
user turn. No key is needed and nothing is written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalnb.app import EXIT_OK, output
from evalnb.core.chains import preview
from evalnb.core.errors import ConfigError, NotYet
from evalnb.records.stores import latest_records

PLACEHOLDER = "[the contestant's answer to this item: not recorded yet]"


def item_requests(params: Path, sets: Sequence[str], item_id: str) -> list[dict[str, Any]]:
    """Every request the item's calls would send, contestant first, then each judge."""
    from evalnb.core.run_config import EndpointConfig
    from evalnb.providers.streams.base import settings_of
    from evalnb.pipeline.run import load_config, make_benchmark

    from evalnb.pipeline.preflight import check_paths

    config, bench_class = load_config(params, sets)
    check_paths(config, str(params))   # the same words as run's for a missing data file or corpus
    bench = make_benchmark(config, bench_class)
    output.warnings(bench.warnings)
    if item_id not in {t.task_id for t in bench.tasks}:
        raise ConfigError(f"prompt: {item_id!r} is not an item of {config.data}"
                          + (" (or not in the run's subset)" if config.subset else ""))
    mine = [c for c in bench.generation_calls() if _of_item(c.key, item_id)]
    recorded = latest_records(config.output_dir / "generate.jsonl")
    answers: dict[str, Any] = {}
    for call in mine:
        answers[call.key] = recorded.get(call.key) if (recorded.get(call.key) or {}).get("status") == "ok" \
            else {"key": call.key, "status": "ok", "text": PLACEHOLDER, "placeholder": True}
    judged = [c for c in bench.judge_calls(answers) if _of_item(c.key, item_id)]
    endpoints: dict[str, EndpointConfig] = {"model": config.model, **dict(config.judge_roles())}
    answered = {k: v for k, v in recorded.items() if v.get("status") == "ok"}
    out = []
    for call in [*mine, *judged]:
        call, awaits = preview(call, answered, lambda key: {"key": key, "status": "ok", "text": PLACEHOLDER})
        endpoint = endpoints.get(call.endpoint)
        entry: dict[str, Any] = {"call": call.key, "role": call.endpoint}
        if endpoint is not None:
            entry.update(provider=endpoint.provider, route=endpoint.name, base_url=endpoint.base_url)
        if awaits:   # its history holds a placeholder where an answer it needs will be
            entry["awaits"] = awaits
        try:
            prepared = call.prepare()
        except NotYet as e:   # the benchmark's own "not yet": nothing to show but that
            entry.update(request=None, not_yet=str(e))
            out.append(entry)
            continue
        request = prepared.request
        if request is None:
            entry["request"] = None
            entry["no_call"] = {k: v for k, v in prepared.fields.items() if k in ("status", "reason", "error")}
        else:
            entry["request"] = {"prompt": request.prompt, "system": request.system, "max_tokens": request.max_tokens,
                                "output_budget_parameter": endpoint.token_param if endpoint else None,
                                "temperature": request.temperature, "json_schema": request.json_schema,
                                "streams": settings_of(endpoint).streams(request) if endpoint else False,
                                "history": [{"role": t.role, "content": t.content} for t in request.history]}
        if call.endpoint != "model":
            entry["on_placeholder_answer"] = any(a.get("placeholder") for a in answers.values())
        out.append(entry)
    return out


def _of_item(key: str, item_id: str) -> bool:
    return key == item_id or key.startswith(f"{item_id}::")


def prompt_command(params: Path, sets: Sequence[str], item_id: str, role: str | None) -> int:
    requests = [r for r in item_requests(params, sets, item_id) if role is None or r["role"] == role]
    if not requests:
        raise ConfigError(f"prompt: no call of item {item_id!r}" + (f" goes to {role}" if role else ""))
    if output.SETTINGS.json:
        output.results("", {"item": item_id, "requests": requests})
        return EXIT_OK
    for entry in requests:
        sys.stdout.write(request_text(entry))
    sys.stdout.flush()
    return EXIT_OK


def request_text(entry: dict[str, Any]) -> str:
    where = f"{entry.get('provider')}, model {entry.get('route')!r}" + \
        (f" at {entry['base_url']}" if entry.get("base_url") else "")
    head = f"=== {entry['role']}: call {entry['call']} -> {where}\n"
    request = entry["request"]
    if entry.get("not_yet"):
        return head + f"not yet: {entry['not_yet']}\n\n"
    if request is None:
        return head + f"no request: decided without a model call ({json.dumps(entry['no_call'])})\n\n"
    settings = [f"{request['output_budget_parameter'] or 'max_tokens'}={request['max_tokens']}",
                ("temperature not sent" if request["temperature"] is None else f"temperature={request['temperature']:g}"),
                "streamed" if request["streams"] else "not streamed",
                "response schema: " + ("none" if request["json_schema"] is None else "json_schema (below)")]
    lines = [head.rstrip("\n"), "settings: " + ", ".join(settings)]
    if entry.get("on_placeholder_answer"):
        lines.append(f"note: no answer recorded yet; the judge prompt holds a placeholder: {PLACEHOLDER}")
    if request["system"] is not None:
        lines += [f"--- system ({len(request['system']):,} characters)", request["system"]]
    if entry.get("awaits"):
        lines.append(f"note: needs the answer(s) of {', '.join(entry['awaits'])}, not recorded yet; the history holds "
                     f"a placeholder: {PLACEHOLDER}")
    if request["json_schema"] is not None:
        lines += ["--- response schema", json.dumps(request["json_schema"], indent=2)]
    for i, turn in enumerate(request.get("history") or (), 1):
        lines += [f"--- turn {i}: {turn['role']} ({len(turn['content']):,} characters)", turn["content"]]
    lines += [f"--- prompt ({len(request['prompt']):,} characters; verbatim, up to the end marker)",
              request["prompt"], "--- end of prompt", "", ""]
    return "\n".join(lines)
