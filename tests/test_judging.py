"""Judge reply parsing, normalisation with a recorded clamp, panel mean."""

import pytest

from evalnb.benchmarks.wildtrace.protocol import normalise, panel_mean, parse_total
from evalnb.core.replies import JudgeReplyError


@pytest.mark.parametrize("reply, total", [
    ('{"points_awarded":[40,35],"total":75}', 75),
    ('Sure! Here is the grading:\n```json\n{"points_awarded": [10, 0], "total": 10}\n```\nThanks.', 10),
    ('Reasoning {not json} then {"points_awarded":[1.5],"total":1.5} done', 1.5),
    ('{"note": "first object has no total"} {"total": "42"}', 42),
    ('{"points_awarded":[{"p":1}],"total":7, "nested": {"total": 99}}', 7),
])
def test_total_is_read_from_the_json_object(reply: str, total: float) -> None:
    assert parse_total(reply) == total


@pytest.mark.parametrize("reply", [
    "I award 75 points.", '{"points_awarded":[40]}', '{"total": "many"}', '{"total": null}',
    '{"total": true}', "```json\n{\"total\": 75\n```", "",
])
def test_no_parsable_total_is_a_failure_not_a_zero(reply: str) -> None:
    with pytest.raises(JudgeReplyError):
        parse_total(reply)


def test_normalise_divides_by_rubric_points_and_records_clamp() -> None:
    assert normalise(75, 100) == normalise(75, 100)
    assert normalise(75, 100).score == 0.75 and not normalise(75, 100).clamped
    assert normalise(30, 60).score == 0.5
    over, under = normalise(120, 100), normalise(-5, 100)
    assert (over.score, over.clamped) == (1.0, True)
    assert (under.score, under.clamped) == (0.0, True)


def test_panel_mean_needs_every_judge() -> None:
    assert panel_mean([0.5, 1.0, 0.0]) == pytest.approx(0.5)
    assert panel_mean([0.5, None, 1.0]) is None
    assert panel_mean([]) is None
