"""tasks.html in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromium-driver (nothing downloads a browser or a driver). The page is loaded from
disk; it must raise no console error, make no network request, and let a reviewer filter
by status, search, sort and expand an item, at 481 items with long responses.

Skipped, saying why, only where no browser can be had; under CI (``CI`` set, where
``.ci/run`` installs chromium) a missing browser is a failure instead."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalnb.evidence.items import evidence_document, load_evidence
from evalnb.evidence.tasks_page import tasks_page, write_tasks_page
from evalnb.core.types import Fact, ItemEvidence, Passage, Table
from tests.browser import console_errors, requests_made, start_chromium, wait_for, wait_for_script

N_ITEMS = 481
STATUSES = ("ok", "out_of_context", "refused", "empty", "failed_permanent")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    driver = start_chromium(("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                             "--window-size=1400,1000", "--no-first-run", "--disable-extensions"), "browser test")
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver: Any, path: Path) -> None:
    driver.get_log("browser")          # drop what an earlier page left
    driver.get_log("performance")
    driver.get(path.resolve().as_uri())
    wait_for_script(driver, f"{path.name} to say it is ready (body data-ready)", """
        const rows = document.querySelectorAll('tr.item').length;
        return {done: !!document.body && document.body.dataset.ready === 'true',
                seen: {readyState: document.readyState, ready: document.body ? document.body.dataset.ready : null,
                       rows: rows}};""", 120)


def visible_ids(driver: Any) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('tr.item')).filter(r => !r.hidden).map(r => r.dataset.id);")


def choose(driver: Any, select_id: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element("id", select_id)).select_by_value(value)


def search(driver: Any, words: str, expected: list[str]) -> None:
    """Type into the search box; wait (at most 30 s) for the rows it should leave."""
    box = driver.find_element("id", "search")
    box.clear()
    if words:
        box.send_keys(words)
    else:   # clear() sends no input event
        driver.execute_script("arguments[0].dispatchEvent(new Event('input'))", box)

    def look() -> tuple[bool, dict[str, Any]]:
        ids = visible_ids(driver)
        return ids == expected, {"shown": len(ids), "first": ids[:5], "expected": len(expected)}

    wait_for(driver, f"the search {words!r} to leave {len(expected)} rows", look, 30)
    assert visible_ids(driver) == expected, words


# --- a page of 481 items with long responses ------------------------------------------------------------

def big_document(secret: str) -> tuple[dict[str, Any], list[ItemEvidence]]:
    rng = np.random.default_rng(7)
    items = []
    for i in range(N_ITEMS):
        status = STATUSES[i % len(STATUSES)] if i % 7 == 0 else "ok"
        judges = {f"judge{j} m{j}": round(float(rng.uniform()), 4) for j in (1, 2, 3)} if status == "ok" else {}
        score = round(sum(judges.values()) / 3, 6) if judges else 0.0
        response = (f"Response {i}. " + "The quarterly report shows revenue grew in every region. " * 400
                    + ("The ferry to zanzibar leaves at dawn." if i == 123 else "")
                    + (f" leaked {secret}" if i == 200 else ""))
        sections = (Fact("status", status), Passage("question", f"What does document {i} say?"),
                    Passage("response", response if status == "ok" else None),
                    Passage("trajectory", "step " * 50, collapsed=True),
                    Table("rubric", ("item", "points", "criterion"), (("P1", 60, f"criterion {i} a"),
                                                                      ("P2", 40, f"criterion {i} b"))))
        items.append(ItemEvidence(f"wt-{i:03d}", status, score, judges, sections))
    meta = {"benchmark": "synthetic", "run_name": "big", "model": "offline:test", "label": None, "complete": True,
            "statuses": list(STATUSES) + ["failed_transient", "pending"], "noun": "task",
            "metrics": [{"label": "All", "value": 0.4, "ci_low": 0.35, "ci_high": 0.45}]}
    return meta, items


@pytest.fixture(scope="module")
def big_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[ItemEvidence], str]:
    secret = "sk-" + os.urandom(16).hex()
    meta, items = big_document(secret)
    path = tmp_path_factory.mktemp("page") / "tasks.html"
    write_tasks_page(path, evidence_document(meta, items))
    return path, items, secret


def test_page_is_self_contained_and_secret_free(big_page: tuple[Path, list[ItemEvidence], str]) -> None:
    path, _, secret = big_page
    text = path.read_text()
    assert secret not in text and "[redacted]" in text
    assert "http://" not in text and "https://" not in text and "src=" not in text and "<link" not in text
    assert "default-src 'none'" in text                       # the page may load nothing at all
    assert path.stat().st_size > 481 * 20_000                  # long responses, all embedded


def test_a_response_cannot_break_out_of_the_embedded_data() -> None:
    item = ItemEvidence("x", "ok", 1.0, {}, (Passage("response", "</script><script>alert(1)</script>"),))
    page = tasks_page(evidence_document({"statuses": ["ok"], "noun": "task"}, [item]))
    assert page.count("<script") == 2 and "</script><script>alert" not in page


def test_481_items_filter_search_sort_and_expand(browser: Any, big_page: tuple[Path, list[ItemEvidence], str]) -> None:
    path, items, secret = big_page
    open_page(browser, path)
    assert len(visible_ids(browser)) == N_ITEMS
    assert browser.find_element("id", "count").text == f"{N_ITEMS} of {N_ITEMS} shown"
    assert browser.find_elements("css selector", ".evidence") == []       # evidence built only when opened

    choose(browser, "status", "refused")
    refused = [i.item_id for i in items if i.status == "refused"]
    assert visible_ids(browser) == refused and refused
    choose(browser, "status", "")

    search(browser, "Zanzibar", ["wt-123"])                      # case does not matter
    search(browser, "ferry wt-123 criterion", ["wt-123"])        # every word, each in any field
    search(browser, "ferry wt-124", [])
    choose(browser, "status", "refused")
    search(browser, "document", refused)                         # search within a status
    choose(browser, "status", "")
    search(browser, "", [i.item_id for i in items])

    choose(browser, "sort", "score-asc")
    order = sorted(range(N_ITEMS), key=lambda n: (items[n].score, n))
    assert visible_ids(browser)[:10] == [items[n].item_id for n in order[:10]]
    choose(browser, "sort", "disagreement-desc")
    spread = sorted((n for n in range(N_ITEMS) if items[n].disagreement is not None),
                    key=lambda n: (-(items[n].disagreement or 0), n))
    ids = visible_ids(browser)
    assert ids[:10] == [items[n].item_id for n in spread[:10]]
    assert ids[-1] in {i.item_id for i in items if i.disagreement is None}   # no spread: last

    target = items[spread[0]]
    browser.find_element("css selector", f"tr.item[data-id='{target.item_id}']").click()
    detail = browser.find_element("css selector", "tr.detail")
    text = detail.text
    assert "What does document" in text and target.item_id.split("-")[1].lstrip("0") in text
    assert "criterion" in text and "P1" in text and "60" in text
    assert len(browser.find_elements("css selector", ".evidence")) == 1
    folded = browser.execute_script("return Array.from(document.querySelectorAll('tr.detail details'))"
                                    ".map(d => [d.querySelector('summary b').textContent, d.open]);")
    assert ["trajectory", False] in folded and ["response", True] in folded
    browser.find_element("css selector", f"tr.item[data-id='{target.item_id}']").click()   # folds again
    assert browser.find_elements("css selector", "tr.detail") == []

    assert secret not in browser.page_source
    assert console_errors(browser) == []
    assert [u for u in requests_made(browser) if not u.startswith("file://")] == []


def test_a_real_runs_item_shows_its_records(browser: Any, tmp_path: Path) -> None:
    from tests.test_evidence import records, run_all
    from tests.test_geoktools import write_cases

    run = run_all(write_cases(tmp_path, [("a", 4, '[100, 200, "Nile", 5]', 'Thinking... [105, 300, "Nile river"]'),
                                         ("b", 1, "[7]", "[7]")]))
    _, items = load_evidence(run.dir)
    open_page(browser, run.dir / "tasks.html")
    assert visible_ids(browser) == ["a", "b"] and items[0].item_id == "a"
    browser.find_element("css selector", "tr.item[data-id='a']").click()
    text = browser.find_element("css selector", "tr.detail").text
    assert records(run, "generate")["a"]["text"] in text
    for row in ("0 100 105 1 within 10%", "1 200 300 0.500 1 - relative error",   # JSON 1.0 is 1 to a browser
                '3 5 (missing) 0 missing'):
        assert row in text.replace("\n", " "), row
    assert console_errors(browser) == [] and [u for u in requests_made(browser) if not u.startswith("file://")] == []


def test_an_item_with_no_response_says_none_without_a_length(
        browser: Any, big_page: tuple[Path, list[ItemEvidence], str]) -> None:
    """A "(none)" under a heading that counted its 6 characters contradicted itself."""
    path, items, _ = big_page
    open_page(browser, path)
    unanswered = next(i for i in items if i.status == "refused")
    browser.find_element("css selector", f"tr.item[data-id='{unanswered.item_id}']").click()
    text = browser.find_element("css selector", "tr.detail").text
    assert "response: (none)" in text and "(6 characters)" not in text
    assert "question (" in text   # a passage with text keeps its length
    assert console_errors(browser) == []
