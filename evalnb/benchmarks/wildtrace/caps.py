"""Context caps and routing (WildTrace §3).

A document is measured in characters (code points of the decoded UTF-8 text). If it is
longer than the model's cap it is *out of context*: scored 0 and sent to nobody. There is
no truncation: §1's "truncated to the cap" is overridden by §3.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from typing import Any

from evalnb.core.tokens import CapKind, cap_kind   # CJK detection lives with the token estimate



@dataclass(frozen=True)
class Caps:
    en: int
    cjk: int
    source: str          # "table:<name>", "default" or "parameters": where the numbers came from

    def for_kind(self, kind: CapKind) -> int:
        return self.en if kind == "en" else self.cjk


@dataclass(frozen=True)
class Route:
    """Route metadata for one task: not an edit of the item (§3)."""

    in_scope: bool
    cap: int
    cap_kind: CapKind
    doc_chars: int

    @property
    def status(self) -> str:
        return "in_scope" if self.in_scope else "out_of_context"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"status": self.status}


@cache
def caps_table() -> dict[str, Any]:
    """The caps table of §3, kept as data in ``caps.json``."""
    return json.loads(resources.files(__package__).joinpath("caps.json").read_text("utf-8"))


def caps_for(model_name: str, override: dict[str, int] | None = None) -> Caps:
    """Exact, case-insensitive lookup; parameters win; unlisted gets the default.

    Never matched by prefix or similarity: ``qwen3.7-max`` must not inherit ``qwen3-max``'s
    smaller cap (the mis-ranking §3 warns about).
    """
    if override:
        return Caps(en=int(override["en"]), cjk=int(override["cjk"]), source="parameters")
    table = caps_table()
    models = {name.lower(): row for name, row in table["models"].items()}
    row = models.get(model_name.strip().lower())
    if row is not None:
        return Caps(en=row["en"], cjk=row["cjk"], source=f"table:{model_name.strip().lower()}")
    default = table["default"]
    return Caps(en=default["en"], cjk=default["cjk"], source="default")


def unlisted_warning(model_name: str, caps: Caps) -> str | None:
    """The visible warning for a model that fell back to the default row."""
    if caps.source != "default":
        return None
    return (f"model {model_name!r} is not in the caps table: using the default caps "
            f"(en {caps.en:,}, cjk {caps.cjk:,} characters). Probe its real window "
            "(evalnb probe-window) and set model.caps in the parameters.")


def route_for(document: str, caps: Caps) -> Route:
    """In scope iff ``len(document) <= cap`` for the document's cap kind."""
    kind = cap_kind(document)
    cap = caps.for_kind(kind)
    return Route(in_scope=len(document) <= cap, cap=cap, cap_kind=kind, doc_chars=len(document))
