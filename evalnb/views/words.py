"""Words a view builds from a benchmark's declarations: the plural of its item noun."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def plural(noun: str) -> str:
    """English plural of a regular noun: query -> queries, case -> cases, match -> matches."""
    if noun.endswith("y") and len(noun) > 1 and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def item_plural(bench: Any) -> str:
    """The benchmark's declared plural (``ITEM_NOUN_PLURAL``), else :func:`plural` of its noun."""
    return getattr(bench, "ITEM_NOUN_PLURAL", None) or plural(getattr(bench, "ITEM_NOUN", "item"))


def count_of(n: int, noun: str, nouns: str | None = None) -> str:
    """``1 query``, ``6 queries``."""
    return f"{n} {noun if n == 1 else (nouns or plural(noun))}"


def nouns_of(meta: Mapping[str, Any] | None) -> tuple[str, str]:
    """A run's item noun and its plural, from the views' metadata (an evidence.json written
    before plurals were recorded: the regular plural)."""
    noun = (meta or {}).get("noun", "item")
    return noun, (meta or {}).get("nouns") or plural(noun)
