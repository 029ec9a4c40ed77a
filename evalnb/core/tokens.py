"""Characters, scripts and token estimates: what every layer needs to size a text.

CJK detection (more than 20 ideographs in the first 4000 characters) decides which of a model's two caps applies; the same test picks
the protocol's characters-per-token figure (about 3.3 for English, 1.5 for CJK text), which
the estimate, the pacer's reservations and the spending ceiling use before a reply reports
the real count.
"""

from __future__ import annotations

from typing import Literal

CapKind = Literal["en", "cjk"]

CJK_WINDOW = 4000       # characters inspected for CJK detection
CJK_THRESHOLD = 20      # strictly more than this many ideographs means the cjk cap
CHARS_PER_TOKEN = {"en": 3.3, "cjk": 1.5}


def cjk_count(text: str) -> int:
    return sum(1 for c in text[:CJK_WINDOW] if "\u4e00" <= c <= "\u9fff")


def cap_kind(document: str) -> CapKind:
    """More than 20 ideographs in the first 4000 characters selects the cjk cap."""
    return "cjk" if cjk_count(document) > CJK_THRESHOLD else "en"


def estimate_tokens(text: str) -> float:
    """Tokens a text is expected to take, by its script (an estimate, never a measurement)."""
    return len(text) / CHARS_PER_TOKEN[cap_kind(text)]
