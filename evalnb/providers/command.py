"""Any LLM through a command: argv from the parameters, prompt on stdin, reply on stdout.

No shell is involved, so a prompt holding shell metacharacters reaches the program
unchanged. The request's settings are passed as environment variables:
``EVALNB_MODEL``, ``EVALNB_MAX_TOKENS``, ``EVALNB_TEMPERATURE`` (empty when not sent),
``EVALNB_SYSTEM``, ``EVALNB_JSON_SCHEMA`` and ``EVALNB_HISTORY`` (a conversation's earlier
turns as a JSON list of ``{role, content}``), each empty when absent. Exit 0 with text is an
answer and exit 0 with nothing is ``empty``; a non-zero exit or a timeout is transient
(retried), with the tail of stderr kept.

The program gets a minimal environment, never evalnb's whole one (which holds every other
endpoint's key): the basics (:data:`BASIC_VARIABLES`), its ``EVALNB_*`` settings, its own
``api_key_env`` and the variables its endpoint lists in ``env``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

from evalnb.providers.base import ChatRequest, Completion, ProviderError, status_of
from evalnb.providers.streams.base import since

STDERR_KEPT = 2000
BASIC_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR",
                   "SYSTEMROOT", "VIRTUAL_ENV", "PYTHONIOENCODING")


def route_of(argv: Sequence[str]) -> str:
    """The program and what it runs: ``command:python3 rater.py``, ``command:python3 -m pkg``.

    Two scripts run by one interpreter must not look alike in a manifest or a compare.
    """
    words = [Path(argv[0]).name]
    rest = list(argv[1:])
    while rest:
        arg = rest.pop(0)
        if arg == "-m" and rest:
            words += ["-m", rest[0]]
            break
        if not arg.startswith("-"):
            words.append(Path(arg).name)
            break
    return "command:" + " ".join(words)


class CommandProvider:
    def __init__(self, model: str, argv: list[str], *, concurrency: int, timeout: float,
                 passed_env: Sequence[str] = ()) -> None:
        self.model, self.argv, self.concurrency, self.timeout = model, list(argv), concurrency, timeout
        self.passed_env = tuple(passed_env)

    def environment(self, request: ChatRequest) -> dict[str, str]:
        passed = (*BASIC_VARIABLES, *self.passed_env)
        inherited = {k: v for k, v in os.environ.items() if k in passed or k.startswith("LC_")}
        return {**inherited,
                "EVALNB_MODEL": self.model,
                "EVALNB_MAX_TOKENS": str(request.max_tokens),
                "EVALNB_TEMPERATURE": "" if request.temperature is None else str(request.temperature),
                "EVALNB_SYSTEM": request.system or "",
                "EVALNB_JSON_SCHEMA": json.dumps(request.json_schema) if request.json_schema else "",
                # the earlier turns of a conversation, oldest first ("" when there are none)
                "EVALNB_HISTORY": json.dumps([{"role": t.role, "content": t.content} for t in request.history])
                if request.history else ""}

    async def complete(self, request: ChatRequest) -> Completion:
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=self.environment(request))
        except OSError as error:
            raise ProviderError("permanent", f"cannot start {self.argv[0]!r}: {error}") from None
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(request.prompt.encode("utf-8")),
                                                    self.timeout)
        except asyncio.TimeoutError:
            process.kill()
            await process.wait()
            raise ProviderError("transient", f"command timed out after {self.timeout:g} s") from None
        if process.returncode != 0:
            tail = stderr.decode("utf-8", "replace")[-STDERR_KEPT:]
            raise ProviderError("transient", f"command exited {process.returncode}: {tail}")
        text = stdout.decode("utf-8", "replace")
        return Completion(text=text, status=status_of(text), finish_reason="exit 0",
                          model_route=route_of(self.argv), latency=since(started))

    async def aclose(self) -> None:
        return None
