"""Exact match and the deterministic scorer, every branch by hand."""

import pytest

from evalnb.benchmarks.geoktools.scoring import deterministic_score, exact_match, last_json_list


@pytest.mark.parametrize("response, golden, expected", [
    ('["Nile", 6650]', '["Nile", 6650]', True),
    ('  ["Nile", 6650]\n', '["Nile", 6650]', True),          # after strip
    ('["Nile",6650]', '["Nile", 6650]', True),               # JSON-equal, not string-equal
    ('["Nile", 6650.0]', '["Nile", 6650]', True),            # JSON numbers compare by value
    ('The answer: ["Nile", 6650]', '["Nile", 6650]', False),  # prose: not an exact match
    ('["nile", 6650]', '["Nile", 6650]', False),
])
def test_exact_match(response: str, golden: str, expected: bool) -> None:
    assert exact_match(response, golden) is expected


def test_last_list_is_taken_and_nesting_respected() -> None:
    assert last_json_list('first [1, 2] then [[3, 4], "a"] end') == [[3, 4], "a"]
    assert last_json_list("no list [here") is None
    assert last_json_list('[1, 2] and [broken') == [1, 2]


@pytest.mark.parametrize("response, golden, score", [
    ("[110]", "[100]", 1.0),              # e = 0.10: inside the tolerance (<=)
    ("[90]", "[100]", 1.0),
    ("[125]", "[100]", 0.75),             # e = 0.25 -> 1 - e
    ("[300]", "[100]", 0.0),              # e = 2 -> max(0, 1 - e)
    ("[-100]", "[100]", 0.0),
    ("[0]", "[0]", 1.0),                  # g = 0: exact equality
    ("[0.001]", "[0]", 0.0),
    ('["110"]', "[100]", 1.0),            # a string holding a number counts as the number
    ('["a lot"]', "[100]", 0.0),
    ('["Nile River"]', '["Nile"]', 2 * (1 / 2 * 1) / (1 / 2 + 1)),   # ROUGE-L F1: P 1/2, R 1
    ('["the Nile"]', '["Nile River"]', 0.5),                          # LCS 1: P 1/2, R 1/2
    ('["Danube"]', '["Nile"]', 0.0),
    ("[100]", '["100"]', 1.0),            # string golden, numeric prediction: ROUGE on its text
    ('["Nile"]', '["Nile", 6650]', 0.5),  # a missing element scores 0
    ('["Nile", 6650, "extra", 1]', '["Nile", 6650]', 1.0),   # extras ignored
    ('I think [1, 2], no wait: ["Nile", 6650]', '["Nile", 6650]', 1.0),
    ("I could not determine this.", '["Nile", 6650]', 0.0),
    ('[[1, 2], true]', '[[1, 2], false]', 0.5),   # other golden elements: JSON equality
    ("[]", "[]", 1.0),
    ("[1]", "[]", 0.0),
])
def test_deterministic_score(response: str, golden: str, score: float) -> None:
    assert deterministic_score(response, golden)[0] == pytest.approx(score)


def test_element_scores_are_reported() -> None:
    score, elements = deterministic_score('["Nile", 5000]', '["Nile", 6650, 3]')
    assert elements == pytest.approx([1.0, 1 - 1650 / 6650, 0.0])
    assert score == pytest.approx((1 + (1 - 1650 / 6650) + 0) / 3)
