"""What a secret looks like, so that none is accepted as a parameter or kept in a record."""

from __future__ import annotations

import re

SECRET_NAME = re.compile(r"^(api_?key|key|secret|token|password|passwd|bearer|credentials?|"
                         r"auth|authorization)$|_(key|secret|token|password)$", re.I)
SECRET_VALUE = re.compile(r"(sk-[A-Za-z0-9_*-]{20,}|sk-ant-[A-Za-z0-9_-]{10,}|AIza[0-9A-Za-z_-]{30,}"
                          r"|gh[pousr]_[A-Za-z0-9]{30,}|hf_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}"
                          r"|Bearer\s+\S{16,})")


def redact(text: str) -> str:
    """``text`` with anything shaped like a key replaced (provider errors may echo one)."""
    return SECRET_VALUE.sub("[redacted]", text)
