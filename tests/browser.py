"""Debian's chromium, headless, through selenium and Debian's chromedriver (nothing downloads a
browser or a driver), and the one way the browser tests wait: on a condition, bounded, saying
what they waited for and what they saw.

A wait that passes prints (to the test's captured output) what it waited for, what it saw and
how long it took; a long one prints what it sees every ``PROGRESS_EVERY`` seconds; one that
gives up fails with the last thing it saw, the page's console, any dialog open on the page and
whatever else the caller can tell (a server's log tail)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

POLL = 0.25            # seconds between two looks at the page
PROGRESS_EVERY = 30.0  # seconds between two "still waiting" lines of a long wait


def _browser_or_reason() -> tuple[str, str] | str:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (it is in the test extra: pip install -e '.[test]')"
    binary = next((shutil.which(b) for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
    driver = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)
    if binary is None or driver is None:
        return "no chromium or chromedriver on this machine (apt-get install chromium chromium-driver; .ci/run does)"
    return binary, driver


# A page that never gets a focus event, as headless chromium leaves a page on some machines: the
# element is focused (document.activeElement) but neither focus nor blur is dispatched, and
# document.hasFocus() is false. Stopped at the window, before any listener of the page sees it.
NO_FOCUS_EVENTS = """
document.hasFocus = () => false;
for (const type of ['focus', 'blur', 'focusin', 'focusout']) {
  window.addEventListener(type, event => event.stopImmediatePropagation(), true);
}
"""


def start_chromium(arguments: tuple[str, ...], what: str, focused: bool = True) -> Any:
    """Debian's chromium through chromedriver, with ``arguments``; under CI a missing browser
    fails the test instead of skipping it. Selenium never downloads a browser or a driver.

    Whether a headless page has the focus depends on the machine (on some, chromium never gives
    it one: ``document.hasFocus()`` false and no ``focus`` event ever dispatched). So that a
    test runs the same everywhere, the page is either told it has the focus (``focused``: the
    window a person works in) or never gets a focus event (the worst such machine), from its
    first script on."""
    found = _browser_or_reason()
    if isinstance(found, str):
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the {what}: {found}")
        pytest.skip(found)
    binary, driver_path = found
    os.environ.setdefault("SE_OFFLINE", "true")   # Selenium Manager: never download anything
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in arguments:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    if focused:
        driver.execute_cdp_cmd("Emulation.setFocusEmulationEnabled", {"enabled": True})
    else:
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": NO_FOCUS_EVENTS})
    return driver


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def requests_made(driver: Any) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def _short(seen: Any, limit: int = 1500) -> str:
    text = seen if isinstance(seen, str) else json.dumps(seen, default=str, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def page_state(driver: Any) -> str:
    """What the page can tell about itself when a wait gives up: its console since the last
    look, the dialogs open on it (their text) and whether it has the focus."""
    lines = []
    try:
        console = driver.get_log("browser")
        errors = [e for e in console if e.get("level") in ("SEVERE", "ERROR")]
        others = [e for e in console if e not in errors]
        lines.append(f"console since the last look: {len(errors)} errors (the last 20), "
                     f"{len(others)} other entries (the last 20):")
        lines += [f"  {e.get('level')} {e.get('message', '')[:400]}" for e in errors[-20:] + others[-20:]]
    except Exception as error:   # the browser itself may be what failed
        lines.append(f"console: could not be read ({error!r})")
    try:
        shown = driver.execute_script(
            "return {dialogs: Array.from(document.querySelectorAll('.jp-Dialog, dialog[open], [role=dialog]'))"
            ".map(d => d.innerText.trim().replace(/\\s*\\n\\s*/g, ' | ').slice(0, 400)),"
            " focus: document.hasFocus(), url: location.href, readyState: document.readyState};")
        lines.append(f"dialogs open: {shown['dialogs'] or 'none'}")
        lines.append(f"page: {shown['url'].split('?')[0]} ({shown['readyState']}), has focus: {shown['focus']}")
    except Exception as error:
        lines.append(f"page: could not be read ({error!r})")
    return "\n".join(lines)


def wait_for(driver: Any, what: str, look: Callable[[], tuple[bool, Any]], timeout: float,
             context: Callable[[], str] | None = None) -> Any:
    """Look (``look()`` gives whether the condition holds and what was seen) every ``POLL``
    seconds until the condition holds, for at most ``timeout`` seconds; return what was seen.
    A look that raises (the page mid-navigation, a script error) counts as not yet, and what it
    raised is what was seen."""
    from selenium.common.exceptions import WebDriverException

    start = time.monotonic()
    next_progress = start + PROGRESS_EVERY
    seen: Any = "nothing yet"
    while True:
        try:
            done, seen = look()
        except WebDriverException as error:
            message = str(error).strip()
            done, seen = False, f"the look failed: {message.splitlines()[0] if message else repr(error)}"
        now = time.monotonic()
        if done:
            print(f"waited {now - start:.1f} s for {what}; saw {_short(seen)}", flush=True)
            return seen
        if now - start > timeout:
            extra = context() if context else ""
            raise AssertionError(f"gave up after {timeout:.0f} s waiting for {what}\nlast seen: {_short(seen, 4000)}\n"
                                 f"{page_state(driver)}" + (f"\n{extra}" if extra else ""))
        if now >= next_progress:
            print(f"still waiting ({now - start:.0f} s of {timeout:.0f}) for {what}; seeing {_short(seen)}", flush=True)
            next_progress = now + PROGRESS_EVERY
        time.sleep(POLL)


def wait_for_script(driver: Any, what: str, script: str, timeout: float, *args: Any,
                    context: Callable[[], str] | None = None) -> Any:
    """``wait_for`` with a look in the page: ``script`` (a function body, given ``args``)
    returns ``{done: bool, seen: ...}``; returns the last ``seen``."""
    def look() -> tuple[bool, Any]:
        result = driver.execute_script(script, *args)
        if not isinstance(result, dict) or "done" not in result:
            return False, f"the look returned {result!r}"
        return bool(result["done"]), result.get("seen")

    return wait_for(driver, what, look, timeout, context)
