"""Secrets: none is accepted as a parameter, and none is kept in anything a run writes.

Two nets. By shape: anything that looks like a known kind of key (a provider error may
echo one). By value: the exact values of the key variables the run's parameters name,
registered when the run opens, so that a key of an unfamiliar shape (a gateway token) is
caught too. Every writer of a run (stores, JSON files, executed notebooks, HTML, messages)
passes its text through :func:`redact`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

# A parameter NAMED as a credential and nothing else. Names that merely contain such a word
# (max_token, judge_max_tokens, sort_key, api_key_env) are ordinary parameters: what holds a
# key is found by its value (SECRET_VALUE), and a misspelt name is an unknown parameter.
SECRET_NAME = re.compile(r"^(api_?key|key|secret|token|access_token|password|passwd|bearer|credentials?|"
                         r"auth|authorization)$", re.I)
SECRET_VALUE = re.compile(r"(sk-[A-Za-z0-9_*-]{20,}|sk-ant-[A-Za-z0-9_-]{10,}|AIza[0-9A-Za-z_-]{30,}"
                          r"|gh[pousr]_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}"
                          r"|Bearer\s+\S{16,})")
REDACTED = "[redacted]"
# Shorter values are not treated as secrets: replacing "x" or "local" everywhere would
# corrupt records, and no real key is that short.
MIN_SECRET_LENGTH = 8

_values: set[str] = set()


def register_secret_values(env_vars: Iterable[str | None]) -> None:
    """Remember the values of these environment variables, to redact them wherever they appear."""
    for name in env_vars:
        value = os.environ.get(name) if name else None
        if value and len(value.strip()) >= MIN_SECRET_LENGTH:
            _values.add(value.strip())


def redact(text: str) -> str:
    """``text`` with every registered key value and anything shaped like a key replaced."""
    return SECRET_VALUE.sub(REDACTED, redact_values(text))


def redact_values(text: str) -> str:
    """Registered values only: cheap enough for every line a store appends."""
    for value in _values:
        if value in text:
            text = text.replace(value, REDACTED)
    return text
