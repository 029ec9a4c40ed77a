"""Caps in characters, CJK detection, exact-name lookup, no truncation."""

import pytest

from evalnb.core.tokens import cap_kind
from evalnb.benchmarks.wildtrace.caps import Caps, caps_for, route_for, unlisted_warning

# Transcribed by hand from the WildTrace protocol's §3 table.
SPEC_TABLE = {
    **{m: (2_850_000, 850_000) for m in (
        "gpt-4.1", "gpt-5.4", "gpt-5.5", "qwen3.5-plus", "qwen3.6-plus", "qwen3.7-max",
        "qwen3.7-plus", "gemini-2.5-pro", "gemini-3.1", "deepseek-v4", "glm-5.2",
        "claude-opus-4.6", "claude-opus-4.8")},
    "deepseek-v3.2": (1_200_000, 400_000), "gpt-5.1": (1_050_000, 320_000),
    "kimi-k2.6": (1_000_000, 320_000), "doubao-seed-2.1": (1_000_000, 320_000),
    "qwen3-max": (690_000, 210_000), "minimax-m2.7": (570_000, 220_000),
}
CAPS = Caps(en=100, cjk=40, source="parameters")


@pytest.mark.parametrize("model", sorted(SPEC_TABLE))
def test_table_matches_spec(model: str) -> None:
    caps = caps_for(model)
    assert (caps.en, caps.cjk) == SPEC_TABLE[model]
    assert caps.source == f"table:{model}"


def test_default_row_and_warning_for_unlisted() -> None:
    caps = caps_for("brand-new-model")
    assert (caps.en, caps.cjk, caps.source) == (2_850_000, 850_000, "default")
    assert "probe" in unlisted_warning("brand-new-model", caps).lower()
    assert unlisted_warning("gpt-5.1", caps_for("gpt-5.1")) is None


def test_lookup_is_exact_never_by_prefix() -> None:
    assert (caps_for("qwen3-max").en, caps_for("qwen3.7-max").en) == (690_000, 2_850_000)
    assert caps_for("qwen3-max-preview").source == "default"   # not qwen3-max's row
    assert caps_for("QWEN3-MAX").source == "table:qwen3-max"   # case-insensitive


def test_parameters_win_over_table() -> None:
    caps = caps_for("qwen3-max", {"en": 5, "cjk": 3})
    assert (caps.en, caps.cjk, caps.source) == (5, 3, "parameters")


def test_length_equal_to_cap_is_in_scope_and_one_more_is_not() -> None:
    at_cap = route_for("x" * 100, CAPS)
    over = route_for("x" * 101, CAPS)
    assert at_cap.in_scope and at_cap.doc_chars == 100 and at_cap.cap == 100
    assert not over.in_scope and over.status == "out_of_context" and over.doc_chars == 101


def test_length_counts_characters_not_bytes() -> None:
    # 100 two-byte characters (200 UTF-8 bytes) fit a 100-character cap.
    doc = "é" * 100
    assert len(doc.encode()) == 200
    assert route_for(doc, CAPS).in_scope


def test_cjk_threshold_is_strictly_more_than_twenty() -> None:
    assert cap_kind("一" * 20 + "a" * 50) == "en"
    assert cap_kind("一" * 21 + "a" * 50) == "cjk"
    assert cap_kind("鿿" * 21) == "cjk" and cap_kind("\u4dff" * 21 + "\ua000" * 21) == "en"


def test_cjk_only_counts_first_4000_characters() -> None:
    assert cap_kind("a" * 3980 + "一" * 21) == "en"      # only 20 inside the window
    assert cap_kind("a" * 3979 + "一" * 21) == "cjk"


def test_cjk_document_uses_cjk_cap() -> None:
    doc = "一" * 41
    route = route_for(doc, CAPS)
    assert (route.cap_kind, route.cap, route.in_scope) == ("cjk", 40, False)
    assert route_for("一" * 40, CAPS).in_scope
