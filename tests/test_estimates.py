"""The one estimate format (evalnb.views.estimates), checked against hand-written strings."""

from evalnb.views.estimates import decimals_for, estimate_text


def test_value_and_interval_with_three_decimals_by_default() -> None:
    assert estimate_text(0.551389, 0.3251, 0.78111) == "0.551 [0.325, 0.781]"


def test_a_narrow_interval_gets_the_decimals_that_keep_its_ends_apart() -> None:
    assert decimals_for(0.5001, 0.5009) == 4
    assert estimate_text(0.5005, 0.5001, 0.5009) == "0.5005 [0.5001, 0.5009]"


def test_missing_parts() -> None:
    assert estimate_text(None) == "-"
    assert estimate_text(float("nan"), 0.1, 0.2) == "-"
    assert estimate_text(0.25) == "0.250"
    assert estimate_text(0.0, 0.0, 0.0) == "0.000 [0.000, 0.000]"
