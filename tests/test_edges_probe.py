"""probe-window at the edges: the filler is exactly the length asked for, so the
length the probe records is the length it sent and proved."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalnb.pipeline import probe
from evalnb.pipeline.run import load_config
from evalnb.providers.base import ChatRequest, Completion, ProviderError
from tests.conftest import SAMPLE, offline_params

LENGTHS = sorted({*range(0, 400), *range(62_400, 62_600), 1_000, 4_096, 123_457, 250_000})


@pytest.mark.parametrize("kind", ["en", "cjk"])
def test_filler_is_exactly_the_requested_length(kind: str) -> None:
    wrong = {n: len(probe.synthetic_document(kind, n, SAMPLE / "corpus")) for n in LENGTHS}    # type: ignore[arg-type]
    assert {n: m for n, m in wrong.items() if m != n} == {}
    assert len(probe.synthetic_document(kind, 62_500)) == 62_500              # the length the issue saw short


def test_filler_kind_is_what_the_caps_rule_sees() -> None:
    # CJK detection by hand: more than 20 ideographs in the first 4000 characters selects the cjk cap.
    def ideographs(text: str) -> int:
        return sum("\u4e00" <= c <= "\u9fff" for c in text[:4000])
    for corpus in (None, SAMPLE / "corpus"):   # built-in prose, and the sample's own documents
        assert ideographs(probe.synthetic_document("cjk", 5000, corpus)) > 20
        assert ideographs(probe.synthetic_document("en", 5000, corpus)) <= 20


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


# --- a probe on real text -------------------------------------------------------------------------

def test_the_probe_documents_are_the_corpus_own_longest_documents() -> None:
    from evalnb.pipeline.probe_text import probe_texts
    corpus = SAMPLE / "corpus"
    texts = probe_texts(corpus, longest=2)
    by_length = sorted(corpus.iterdir(), key=lambda p: -len(p.read_text("utf-8")))
    english = [p for p in by_length if not any("\u4e00" <= c <= "\u9fff" for c in p.read_text("utf-8")[:4000])]
    chinese = [p for p in by_length if p not in english]
    assert texts["en"].source == f"corpus: {english[0].name}, {english[1].name}"
    assert texts["cjk"].source == f"corpus: {chinese[0].name}, {chinese[1].name}"
    whole = english[0].read_text("utf-8") + "\n\n" + english[1].read_text("utf-8") + "\n\n"
    assert texts["en"].document(len(whole) + 10) == whole + whole[:10]   # repeated past its end
    # no corpus (or none of a kind): natural prose of that script, said so
    assert probe_texts(None)["en"].source.startswith("built-in prose")


@pytest.mark.parametrize("reserve", [False, True])
def test_a_cap_probed_on_the_corpus_fits_its_documents(tmp_path: Path, reserve: bool) -> None:
    """Against a server whose window counts its own tokens (words and marks, not characters),
    the probe's cap is the real edge for documents of this corpus: never over it, and within
    1 % of it (2 % where the server reserves the run's output budget and the cap is computed
    from the measured characters a token, then checked). The edge is found here by the
    fake's tokenizer, independently of the probe."""
    from evalnb.benchmarks.wildtrace.protocol import MAX_TOKENS, render_answer_prompt
    from evalnb.pipeline.probe_text import ProbeText, probe_texts
    from tests.conftest import openai_params
    from tests.fakeserver import FakeLLMServer, Text, word_tokens

    window = 20_000
    with FakeLLMServer() as server:
        server.context_tokens, server.reserve_output = window, reserve
        server.responder = lambda request: Text("OK")
        config, _ = load_config(openai_params(tmp_path, server.url))
        results = probe.probe_window(config, upper={"en": 200_000, "cjk": 60_000}, max_calls=40)
        budgets = {r.body.get("max_tokens") for r in server.requests}
    assert budgets == {16, MAX_TOKENS}   # the search asks for a word; one check with the run's budget
    texts = probe_texts(SAMPLE / "corpus")
    for result in results:
        text = texts[result.kind]
        assert text.source.startswith("corpus: ") and result.text_source == text.source

        def fits(n: int, text: ProbeText = text) -> bool:
            prompt = render_answer_prompt(probe.PROBE_QUESTION, text.document(n))
            return word_tokens(prompt) + (MAX_TOKENS if reserve else 0) <= window
        low, high = 0, 200_000
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
        edge = low
        assert result.cap <= edge, (result, edge)
        assert result.cap >= edge * (0.98 if reserve else 0.99), (result, edge)
        assert ("reserves it from the window" in result.budget_check) == reserve
