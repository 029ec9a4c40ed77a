"""Reference label files: read, checked against the run, and each problem one line naming the
file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalnb.core.errors import DataError
from evalnb.judges.reference_labels import read_labels

ITEMS = {"t1", "t2", "t3"}


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "labels.csv"
    path.write_text(text)
    return path


def test_a_label_file_is_read_with_its_raters_and_answers(tmp_path: Path) -> None:
    path = _file(tmp_path, "id,score,rater\nt1,2,ann\nt1,1,bob\nt3,0,ann\n")
    labels = read_labels(path, items=ITEMS, scale=(0, 2), levels=[0, 1, 2])
    assert [label.line for label in labels.labels] == [2, 3, 4]
    assert labels.raters() == ["ann", "bob"]
    assert labels.mean_by_answer() == {("t1", ""): 1.5, ("t3", ""): 0.0}
    assert labels.items() == {"t1", "t3"}


@pytest.mark.parametrize(("text", "problem"), [
    ("id,score\nt1,1\nt9,0\n", r"labels\.csv, line 3, field 'id': the run has no item 't9'"),
    ("id,score\nt1,3\n", r"line 2, field 'score': the score 3 is not one of the scale's levels 0, 1, 2"),
    ("id,score\nt1,high\n", r"line 2, field 'score': the score 'high' is not a number"),
    ("id,score\nt1,1\nt2,0\nt1,2\n", r"line 4, field 'id': a second label for item 't1' \(the first is on line 2\)"),
    ("id,score,rater\nt1,1,ann\nt1,2,ann\n", r"line 3, .*by rater 'ann'"),
    ("item,score\nt1,1\n", r"line 1: the header has no column id"),
    ("id,score,grade\nt1,1,a\n", r"line 1: unknown column grade"),
    ("id,score\n", r"holds no label"),
])
def test_each_problem_is_one_line_naming_file_line_and_field(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(DataError, match=problem) as caught:
        read_labels(_file(tmp_path, text), items=ITEMS, scale=(0, 2), levels=[0, 1, 2])
    assert "\n" not in str(caught.value) and str(tmp_path / "labels.csv") in str(caught.value)


def test_a_continuous_scale_and_a_design_are_checked(tmp_path: Path) -> None:
    path = _file(tmp_path, "id,score\nt1,0.25\nt2,1.5\n")
    with pytest.raises(DataError, match=r"line 3, field 'score': the score 1.5 lies off the scale \[0, 1\]"):
        read_labels(path, items=ITEMS, scale=(0, 1))
    with pytest.raises(DataError, match=r"field 'design': the labelling design 'convenience'"):
        read_labels(path, items=ITEMS, scale=(0, 2), design="convenience")
    assert read_labels(path, items=ITEMS, scale=(0, 2), design="stratified").design == "stratified"


def test_answers_of_an_item_are_named_as_the_run_names_them(tmp_path: Path) -> None:
    path = _file(tmp_path, "id,answer,score\nt1,r0,1\nt1,r1,0\nt2,r5,1\n")
    with pytest.raises(DataError, match=r"line 4, field 'answer': no answer 'r5'"):
        read_labels(path, items=ITEMS, scale=(0, 1), answers={"r0", "r1", "r2"})
