"""The text a window probe sends: the run's own corpus, so the cap it finds is one that
real documents of that corpus fit.

A model's window is counted in tokens, and characters per token depend on the text: the
old synthetic filler (short English words from a list) ran about 6.5 characters a token
against a real tokenizer, the sample's documents 3.7 to 4.0, so a cap probed on filler let
through documents half again too long. The probe therefore builds each probe document from
the corpus: the longest documents of the cap kind being probed, concatenated
(longest first) and repeated as needed, cut to the length tried. Only a kind the corpus has
no document of (an English-only corpus has no CJK text) falls back to a built-in paragraph
of natural prose in that script, and the result says which text was used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from evalnb.core.tokens import CapKind, cap_kind

SEPARATOR = "\n\n"

# Natural prose, not word lists: characters per token close to real documents'.
BUILT_IN = {
    "en": ("The harbour authority reported that cargo volumes rose by six per cent in the third quarter, "
           "driven mainly by container traffic from the new eastern terminal. Maintenance of the northern "
           "breakwater continued under budget, although two weeks of storms in October delayed the dredging "
           "of the approach channel. The board approved a revised tariff for bulk grain, effective from the "
           "first of January, and noted that staff turnover had fallen for the second year running. "),
    "cjk": ("港口管理局报告称，第三季度货物吞吐量同比增长百分之六，主要得益于新东部码头的集装箱运输。"
            "北部防波堤的维护工程继续在预算内进行，但十月份连续两周的风暴推迟了航道的疏浚工作。"
            "董事会批准了散装粮食的新收费标准，自明年一月一日起执行，并指出员工流失率已连续第二年下降。"),
}


@dataclass(frozen=True)
class ProbeText:
    """The text probe documents of one cap kind are cut from, and where it came from."""

    kind: CapKind
    text: str
    source: str          # "corpus: a.txt, b.txt" or "built-in prose (the corpus has no such document)"

    def document(self, chars: int) -> str:
        """A probe document of exactly ``chars`` characters."""
        if chars <= 0:
            return ""
        repeats = -(-chars // len(self.text))
        return (self.text * repeats)[:chars] if repeats > 1 else self.text[:chars]


def probe_texts(corpus: Path | None, longest: int = 5) -> dict[CapKind, ProbeText]:
    """One :class:`ProbeText` per cap kind: the corpus's ``longest`` documents of that kind,
    or the built-in prose where it has none. Unreadable (non-UTF-8) and blank files are
    skipped; their reading is the corpus check's business, not the probe's."""
    documents: dict[CapKind, list[tuple[str, str]]] = {"en": [], "cjk": []}
    if corpus is not None and corpus.is_dir():
        for path in sorted(p for p in corpus.rglob("*") if p.is_file()):
            try:
                text = path.read_text("utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            if text.strip():
                documents[cap_kind(text)].append((path.relative_to(corpus).as_posix(), text))
    texts: dict[CapKind, ProbeText] = {}
    for kind, found in documents.items():
        chosen = sorted(found, key=lambda named: (-len(named[1]), named[0]))[:longest]
        joined = SEPARATOR.join(text for _, text in chosen)
        if chosen and cap_kind(joined) == kind:
            texts[kind] = ProbeText(kind, joined + SEPARATOR, "corpus: " + ", ".join(name for name, _ in chosen))
        else:
            texts[kind] = ProbeText(kind, BUILT_IN[kind], "built-in prose (the corpus has no such document)")
    return texts
