"""Pairwise judging against a baseline, in the style of Arena-Hard: the verdict labels, the
position swap, the win rate with its cluster bootstrap interval, and Bradley-Terry scores.

A pairwise judge sees two answers, A and B, and replies with one of five labels, ``[[A>>B]]``
(A much better) ... ``[[B>>A]]``. Judges favour a position, so each comparison is judged in
both orders: game 1 with the contestant as A, game 2 with it as B. Each game is read from the
contestant's side (:func:`contestant_label`), so the two games of one item can be compared
(:func:`consistency`: the share of items whose two games agree) and scored:

- the win rate counts a win 1, a tie 0.5, a loss 0, strong or not, each game once, and its
  interval resamples items (or the clusters they belong to), both games of an item together,
  since they are not independent;
- the Bradley-Terry fit counts a strong verdict ``strong_weight`` times (Arena-Hard uses 3), a
  tie as half a win for each side, and gives Elo-scaled scores (400 points for tenfold odds)
  with the baseline anchored at 1000, bootstrap percentile intervals over battles resampled,
  and ranks (1 + the contestants whose interval lies wholly above one's own).

numpy is imported when a function is called.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from evalnb.core.replies import JudgeReplyError

if TYPE_CHECKING:
    import numpy as np

LABELS = ("A>>B", "A>B", "A=B", "B>A", "B>>A")
_LABEL = re.compile(r"\[\[(A>>B|A>B|A=B|B=A|B>A|B>>A)\]\]")
# A label from the contestant's side: its score in a game, and whether the verdict is strong.
WIN_SCORE = {"A>>B": 1.0, "A>B": 1.0, "A=B": 0.5, "B>A": 0.0, "B>>A": 0.0}
STRONG = frozenset({"A>>B", "B>>A"})
SWAPPED = {"A>>B": "B>>A", "A>B": "B>A", "A=B": "A=B", "B>A": "A>B", "B>>A": "A>>B"}


def read_verdict(reply: str) -> str:
    """The one label ``[[A>>B]]`` ... ``[[B>>A]]`` in a judge's reply (``[[B=A]]`` read as
    ``A=B``); a reply with none, or with labels that disagree, raises JudgeReplyError (a judge
    failure, resumable, never a tie)."""
    found = {"A=B" if label == "B=A" else label for label in _LABEL.findall(reply)}
    if len(found) != 1:
        raise JudgeReplyError(f"expected one verdict of {', '.join(f'[[{lbl}]]' for lbl in LABELS)}, found "
                              f"{', '.join(sorted(found)) or 'none'}")
    return found.pop()


def contestant_label(label: str, contestant_is_a: bool) -> str:
    """The verdict of a game from the contestant's side, as if it had been answer A."""
    return label if contestant_is_a else SWAPPED[label]


def consistency(games: Sequence[tuple[str, str]]) -> float:
    """The share of items whose two games (each from the contestant's side) have the same
    winner (win, tie or loss, strength aside): how little the verdicts depend on position.
    NaN for no items."""
    if not games:
        return math.nan
    return sum(WIN_SCORE[a] == WIN_SCORE[b] for a, b in games) / len(games)


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float
    n: int          # items (or clusters) resampled
    n_boot: int
    seed: int


def win_rate(games: Sequence[Sequence[str]], clusters: Sequence[str] | None = None, *,
             n_boot: int = 2000, seed: int = 0, confidence: float = 0.95) -> Interval:
    """The contestant's win rate over every game (labels from its side), with the percentile
    interval of a bootstrap that resamples items, or whole ``clusters`` (one label per item)
    when given, each with all its games (numpy's PCG64 seeded with ``seed``)."""
    import numpy as np

    scores = [np.array([WIN_SCORE[g] for g in item], dtype=float) for item in games]
    units = list(clusters) if clusters is not None else [str(i) for i in range(len(games))]
    names = list(dict.fromkeys(units))
    sums = np.array([sum(s.sum() for s, u in zip(scores, units) if u == name) for name in names])
    counts = np.array([sum(len(s) for s, u in zip(scores, units) if u == name) for name in names])
    value = float(sums.sum() / counts.sum())
    draws = np.random.default_rng(seed).integers(0, len(names), size=(n_boot, len(names)))
    replicates = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail])
    return Interval(value, float(low), float(high), len(names), n_boot, seed)


@dataclass(frozen=True)
class Battle:
    """One judged game between two contestants, its verdict from ``a``'s side."""

    a: str
    b: str
    label: str


def _design(battles: Sequence[Battle], players: Sequence[str], strong_weight: float
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of a logistic regression without intercept: +1 for a, -1 for b; outcome 1 when a
    won; weight ``strong_weight`` for a strong verdict; a tie is two half-weight rows, one won
    by each side."""
    import numpy as np

    index = {p: i for i, p in enumerate(players)}
    rows, outcomes, weights = [], [], []
    for battle in battles:
        x = np.zeros(len(players))
        x[index[battle.a]], x[index[battle.b]] = 1.0, -1.0
        weight = strong_weight if battle.label in STRONG else 1.0
        if battle.label == "A=B":
            rows += [x, x]
            outcomes += [1.0, 0.0]
            weights += [0.5, 0.5]
        else:
            rows.append(x)
            outcomes.append(WIN_SCORE[battle.label])
            weights.append(weight)
    return np.array(rows), np.array(outcomes), np.array(weights)


def _fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, anchor: int) -> np.ndarray:
    """Weighted logistic maximum likelihood by Newton's method, the anchor's strength fixed at 0
    (a tiny ridge keeps a contestant that never lost finite)."""
    import numpy as np

    free = [i for i in range(x.shape[1]) if i != anchor]
    xf = x[:, free]
    beta = np.zeros(len(free))
    for _ in range(100):
        p = 1 / (1 + np.exp(-(xf @ beta)))
        gradient = xf.T @ (w * (y - p)) - 1e-8 * beta
        hessian = (xf * (w * p * (1 - p))[:, None]).T @ xf + 1e-8 * np.eye(len(free))
        step = np.linalg.solve(hessian, gradient)
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    full = np.zeros(x.shape[1])
    full[free] = beta
    return full


def bradley_terry(battles: Sequence[Battle], baseline: str, *, strong_weight: float = 3.0, n_boot: int = 200,
                  seed: int = 0, confidence: float = 0.95) -> dict[str, dict[str, float]]:
    """Each contestant's Bradley-Terry score on the Elo scale (``1000 + 400 * log10`` of its
    odds against the baseline), with the percentile interval of ``n_boot`` refits on battles
    resampled (numpy's PCG64 seeded with ``seed``) and its rank: 1 + the contestants whose
    interval's low end is above this one's high end."""
    import numpy as np

    players = sorted({p for b in battles for p in (b.a, b.b)})
    if baseline not in players:
        raise ValueError(f"bradley_terry: the baseline {baseline!r} is in no battle")
    anchor = players.index(baseline)
    scale = 400 / math.log(10)
    x, y, w = _design(battles, players, strong_weight)
    point = 1000 + scale * _fit(x, y, w, anchor)
    rng = np.random.default_rng(seed)
    replicates = []
    for _ in range(n_boot):
        picked = [battles[i] for i in rng.integers(0, len(battles), size=len(battles))]
        xb, yb, wb = _design(picked, players, strong_weight)
        replicates.append(1000 + scale * _fit(xb, yb, wb, anchor))
    tail = (1 - confidence) / 2
    low, high = np.quantile(np.array(replicates), [tail, 1 - tail], axis=0)
    out: dict[str, dict[str, float]] = {p: {"score": float(point[i]), "low": float(low[i]), "high": float(high[i])}
                                        for i, p in enumerate(players)}
    for p in players:
        out[p]["rank"] = float(1 + sum(out[q]["low"] > out[p]["high"] for q in players if q != p))
    return out


def battles_against(baseline: str, games: Mapping[str, Sequence[Sequence[str]]]) -> list[Battle]:
    """Battles from each contestant's games against ``baseline`` (labels from the contestant's side)."""
    return [Battle(model, baseline, label) for model, items in games.items() for item in items for label in item]
