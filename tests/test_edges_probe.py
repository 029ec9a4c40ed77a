"""probe-window at the edges (issue 10): the filler is exactly the length asked for, so the
length the probe records is the length it sent and proved."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalnb.stages import probe
from evalnb.stages.pipeline import load_config
from evalnb.providers.base import ChatRequest, Completion, ProviderError
from tests.conftest import offline_params

LENGTHS = sorted({*range(0, 400), *range(62_400, 62_600), 1_000, 4_096, 123_457, 250_000})


@pytest.mark.parametrize("kind", ["en", "cjk"])
def test_filler_is_exactly_the_requested_length(kind: str) -> None:
    wrong = {n: len(probe.synthetic_document(kind, n)) for n in LENGTHS}    # type: ignore[arg-type]
    assert {n: m for n, m in wrong.items() if m != n} == {}
    assert len(probe.synthetic_document(kind, 62_500)) == 62_500              # the length the issue saw short


def test_filler_kind_is_what_the_caps_rule_sees() -> None:
    # Reading 3 by hand: more than 20 ideographs in the first 4000 characters selects the cjk cap.
    def ideographs(text: str) -> int:
        return sum("\u4e00" <= c <= "\u9fff" for c in text[:4000])
    assert ideographs(probe.synthetic_document("cjk", 5000)) == 4000
    assert ideographs(probe.synthetic_document("en", 5000)) == 0


class WindowedProvider:
    """Accepts a document of at most ``limits[kind]`` characters, as sent; remembers each one."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = limits
        self.sent: list[tuple[str, int, bool]] = []

    async def complete(self, request: ChatRequest) -> Completion:
        document = request.prompt.split("\n\nDocument:\n", 1)[1]
        kind = "cjk" if any("\u4e00" <= c <= "\u9fff" for c in document[:100]) else "en"
        fits = len(document) <= self.limits[kind]
        self.sent.append((kind, len(document), fits))
        if not fits:
            raise ProviderError("permanent", "This model's maximum context length is exceeded",
                                status_code=400, code="context_length_exceeded")
        return Completion("OK", "ok")

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("limit", [997, 1_000, 1_001, 4_099, 6_250, 6_251, 9_999, 12_345, 15_000, 17_777,
                                   18_003, 19_998])
def test_recorded_window_is_what_was_sent_and_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       limit: int) -> None:
    provider = WindowedProvider({"en": limit, "cjk": limit // 3})
    monkeypatch.setattr(probe, "make_provider", lambda endpoint: provider)
    config, _ = load_config(offline_params(tmp_path))
    results = probe.probe_window(config, upper={"en": 20_000, "cjk": 20_000}, tolerance=0.0, max_calls=60)
    for result in results:
        sent = [(n, fits) for kind, n, fits in provider.sent if kind == result.kind]
        assert len(sent) == result.calls
        assert result.accepted_chars == max(n for n, fits in sent if fits) == provider.limits[result.kind]
        assert result.rejected_chars == min(n for n, fits in sent if not fits) == provider.limits[result.kind] + 1
    assert probe.caps_entry(results) == {"en": limit, "cjk": limit // 3}
