"""What a base64 data URI looks like (``data:image/png;base64,iVBOR…``), the one rule for every
reader of a page or a notebook that must step over embedded bytes.

The key scan leaves out embedded images (random base64 can look like a key) and the paper
copy leaves every data URI alone when it makes paths relative (base64 can look like a path).
The rule lives here, at the bottom of the layers, because it is a fact about text, not about
a record or a page: both :mod:`evalnb.records.keyscan` and :mod:`evalnb.pages.paper` read it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# The media type (``image/png``, ``text/plain``), then the base64 payload.
DATA_URI = re.compile(r"data:(?P<mime>[\w/+.-]+);base64,[A-Za-z0-9+/=]+")


def is_image(match: re.Match[str]) -> bool:
    """Whether a :data:`DATA_URI` match holds an image (``data:image/...``)."""
    return match.group("mime").startswith("image/")


def outside_data_uris(text: str, change: Callable[[str], str]) -> str:
    """``text`` with ``change`` applied to every stretch outside a data URI; the URIs unchanged."""
    parts, start = [], 0
    for match in DATA_URI.finditer(text):
        parts += [change(text[start:match.start()]), match.group(0)]
        start = match.end()
    parts.append(change(text[start:]))
    return "".join(parts)
