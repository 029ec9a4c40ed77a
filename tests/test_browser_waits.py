"""The browser tests' wait (tests/browser.py) explains itself: a wait that passes says what it
waited for, what it saw and how long; one that gives up says the same and what the page can tell
(its console, its dialogs, its focus) and what the caller adds (a server's log tail). Checked on
a stand-in for the page, so that it takes no browser and a fraction of a second."""

from __future__ import annotations

from typing import Any

import pytest

import tests.browser as browser


class StandInPage:
    """Answers what a selenium driver answers to page_state, as a page with a dialog open would."""

    def get_log(self, kind: str) -> list[dict[str, Any]]:
        assert kind == "browser"
        return [{"level": "INFO", "message": "Starting WebSocket"},
                {"level": "SEVERE", "message": "Uncaught TypeError: kernel is null"}]

    def execute_script(self, script: str, *args: Any) -> dict[str, Any]:
        return {"dialogs": ["Select Kernel | Python 3 (ipykernel) | Select"], "focus": False,
                "url": "http://127.0.0.1:1/lab?token=t", "readyState": "complete"}


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser, "POLL", 0.01)
    monkeypatch.setattr(browser, "PROGRESS_EVERY", 0.05)


def test_a_wait_that_gives_up_says_what_it_waited_for_and_saw(capsys: pytest.CaptureFixture[str]) -> None:
    from selenium.common.exceptions import JavascriptException

    looks = iter([JavascriptException("p is undefined")])

    def look() -> tuple[bool, Any]:
        failure = next(looks, None)
        if failure:
            raise failure
        return False, {"connectionStatus": "connecting", "status": "unknown"}

    with pytest.raises(AssertionError) as failed:
        browser.wait_for(StandInPage(), "the notebook's kernel to connect", look, 0.2, lambda: "server log: kernel started")
    message = str(failed.value)
    assert message.startswith("gave up after 0 s waiting for the notebook's kernel to connect\n")
    assert 'last seen: {"connectionStatus": "connecting", "status": "unknown"}' in message
    assert "1 errors" in message and "SEVERE Uncaught TypeError: kernel is null" in message
    assert "dialogs open: ['Select Kernel | Python 3 (ipykernel) | Select']" in message
    assert "has focus: False" in message and "token" not in message
    assert message.endswith("server log: kernel started")
    out = capsys.readouterr().out
    assert "still waiting" in out and "for the notebook's kernel to connect; seeing" in out   # progress


def test_a_wait_that_passes_says_what_it_saw_and_how_long(capsys: pytest.CaptureFixture[str]) -> None:
    seen = iter([(False, {"ran": 1}), (False, {"ran": 2}), (True, {"ran": 3})])
    assert browser.wait_for(StandInPage(), "Run All to finish", lambda: next(seen), 5) == {"ran": 3}
    out = capsys.readouterr().out
    assert out.startswith("waited ") and out.rstrip().endswith('s for Run All to finish; saw {"ran": 3}')
