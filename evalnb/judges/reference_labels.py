"""Reference labels: a file of scores that people (or a reference grader) gave to some items,
read and checked against a run before any judge is measured against them.

The file is CSV with a header. Columns:

- ``id`` (required): the item's id, as in the run;
- ``score`` (required): the reference score on the benchmark's own scale (a rubric total, a
  0-1 score, a 0/1/2 rating);
- ``answer`` (optional): which of an item's answers the label is for, where the benchmark has
  several (a repeat's index, a call's name); empty for the item's only answer;
- ``rater`` (optional): who gave the label; several raters may label one answer, each once.

How the labelled items were drawn is declared beside the file, since the estimates depend on
it: ``random`` (a simple random sample of the items) or ``stratified`` (at random within each
stratum of the benchmark, at rates that may differ; the estimates weight each stratum by its
share of the items). Anything else would need inclusion probabilities the file cannot carry, so
it is refused.

Every problem is one line naming the file, the line and the field: an item the run does not
have, a score that is not a number or lies off the scale, a label given twice for the same
answer by the same rater. Nothing is read past the first problem.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from evalnb.core.errors import DataError

DESIGNS = ("random", "stratified")
REQUIRED = ("id", "score")
OPTIONAL = ("answer", "rater")


@dataclass(frozen=True)
class Label:
    item: str
    score: float
    answer: str = ""
    rater: str = ""
    line: int = 0


@dataclass(frozen=True)
class ReferenceLabels:
    """The labels of one file, checked, with the design they were drawn by."""

    source: str
    design: str
    labels: tuple[Label, ...]

    def items(self) -> set[str]:
        return {label.item for label in self.labels}

    def raters(self) -> list[str]:
        return sorted({label.rater for label in self.labels})

    def mean_by_answer(self) -> dict[tuple[str, str], float]:
        """The reference score of each labelled answer: the mean over its raters."""
        sums: dict[tuple[str, str], list[float]] = {}
        for label in self.labels:
            sums.setdefault((label.item, label.answer), []).append(label.score)
        return {key: sum(v) / len(v) for key, v in sums.items()}


def _score(text: str, source: str, line: int, scale: tuple[float, float], levels: Sequence[float] | None) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(source, f"the score {text!r} is not a number", line=line, field="score") from None
    if not math.isfinite(value):
        raise DataError(source, f"the score {text!r} is not a finite number", line=line, field="score")
    if levels is not None and value not in {float(v) for v in levels}:
        raise DataError(source, f"the score {value:g} is not one of the scale's levels "
                                f"{', '.join(f'{v:g}' for v in levels)}", line=line, field="score")
    low, high = scale
    if not low <= value <= high:
        raise DataError(source, f"the score {value:g} lies off the scale [{low:g}, {high:g}]", line=line,
                        field="score")
    return value


def read_labels(path: Path, *, items: Collection[str], scale: tuple[float, float],
                levels: Sequence[float] | None = None, design: str = "random",
                answers: Collection[str] | None = None) -> ReferenceLabels:
    """Read and check ``path`` against the run's ``items`` (and, where an item has several
    answers, their names ``answers``); see the module doc for the format and the checks."""
    source = str(path)
    if design not in DESIGNS:
        raise DataError(source, f"the labelling design {design!r} is not one of {', '.join(DESIGNS)}",
                        field="design")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise DataError(source, f"cannot be read ({error.strerror or error})") from None
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DataError(source, f"the header has no column {', '.join(missing)} (it needs "
                                f"{', '.join(REQUIRED)}; optional: {', '.join(OPTIONAL)})", line=1)
    unknown = [c for c in header if c not in (*REQUIRED, *OPTIONAL)]
    if unknown:
        raise DataError(source, f"unknown column {', '.join(unknown)} (known: {', '.join((*REQUIRED, *OPTIONAL))})",
                        line=1)
    known = set(items)
    seen: dict[tuple[str, str, str], int] = {}   # (item, answer, rater) -> the line of its first label
    labels: list[Label] = []
    for line, row in enumerate(reader, start=2):
        item = (row.get("id") or "").strip()
        if not item:
            raise DataError(source, "the item id is empty", line=line, field="id")
        if item not in known:
            raise DataError(source, f"the run has no item {item!r}", line=line, field="id")
        answer = (row.get("answer") or "").strip()
        if answer and answers is not None and answer not in answers:
            raise DataError(source, f"no answer {answer!r} (the run's answers are named "
                                    f"{', '.join(sorted(answers))})", line=line, field="answer")
        rater = (row.get("rater") or "").strip()
        key = (item, answer, rater)
        if key in seen:
            who = f" by rater {rater!r}" if rater else ""
            raise DataError(source, f"a second label for item {item!r}{' answer ' + repr(answer) if answer else ''}"
                                    f"{who} (the first is on line {seen[key]})", line=line, field="id")
        seen[key] = line
        labels.append(Label(item, _score((row.get("score") or "").strip(), source, line, scale, levels),
                            answer, rater, line))
    if not labels:
        raise DataError(source, "holds no label")
    return ReferenceLabels(source, design, tuple(labels))
