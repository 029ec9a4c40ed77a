"""Any LLM through a command: argv from the parameters, prompt on stdin, reply on stdout.

No shell is involved, so a prompt holding shell metacharacters reaches the program
unchanged. The request's settings are passed as environment variables:
``EVALNB_MODEL``, ``EVALNB_MAX_TOKENS``, ``EVALNB_TEMPERATURE`` (empty when not sent),
``EVALNB_SYSTEM`` and ``EVALNB_JSON_SCHEMA`` (empty when absent). Exit 0 with text is an
answer and exit 0 with nothing is ``empty``; a non-zero exit or a timeout is transient
(retried), with the tail of stderr kept.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from evalnb.providers.base import ChatRequest, Completion, ProviderError, status_of

STDERR_KEPT = 2000


class CommandProvider:
    def __init__(self, model: str, argv: list[str], *, concurrency: int, timeout: float) -> None:
        self.model, self.argv, self.concurrency, self.timeout = model, list(argv), concurrency, timeout

    def environment(self, request: ChatRequest) -> dict[str, str]:
        return {**os.environ,
                "EVALNB_MODEL": self.model,
                "EVALNB_MAX_TOKENS": str(request.max_tokens),
                "EVALNB_TEMPERATURE": "" if request.temperature is None else str(request.temperature),
                "EVALNB_SYSTEM": request.system or "",
                "EVALNB_JSON_SCHEMA": json.dumps(request.json_schema) if request.json_schema else ""}

    async def complete(self, request: ChatRequest) -> Completion:
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
                          model_route=f"command:{Path(self.argv[0]).name}")

    async def aclose(self) -> None:
        return None
