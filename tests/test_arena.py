"""Pairwise judging helpers: the verdict parser, the position swap, the win rate with its
cluster bootstrap, and Bradley-Terry scores checked against an independent logistic regression
(statsmodels' binomial GLM) on data simulated here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import statsmodels.api as sm

from evalnb.api import JudgeReplyError
from evalnb.stats.arena import Battle, bradley_terry, consistency, contestant_label, read_verdict, win_rate


@pytest.mark.parametrize("reply, label", [("Clearly better. [[A>>B]]", "A>>B"), ("My final verdict: [[B>A]].", "B>A"),
                                          ("tie: [[B=A]]", "A=B"), ("[[A>B]] as said: [[A>B]]", "A>B")])
def test_a_verdict_is_read(reply: str, label: str) -> None:
    assert read_verdict(reply) == label


@pytest.mark.parametrize("reply", ["A is better", "[[A>B]] or maybe [[B>A]]", "[[A>>>B]]"])
def test_a_reply_without_one_verdict_is_a_judge_failure(reply: str) -> None:
    with pytest.raises(JudgeReplyError, match="expected one verdict"):
        read_verdict(reply)


def test_the_swapped_game_is_read_from_the_contestants_side() -> None:
    assert contestant_label("B>>A", contestant_is_a=False) == "A>>B"
    assert contestant_label("A>B", contestant_is_a=False) == "B>A"
    assert contestant_label("A=B", contestant_is_a=False) == "A=B"
    # items: (game 1, game 2) from the contestant's side; the 2nd and 4th disagree on the winner
    assert consistency([("A>B", "A>>B"), ("A>B", "B>A"), ("A=B", "A=B"), ("B>>A", "A=B")]) == 0.5


def test_the_win_rate_and_its_cluster_bootstrap() -> None:
    games = [("A>>B", "A>B"), ("B>A", "A=B"), ("A=B", "A=B"), ("B>>A", "B>A"), ("A>B", "A>B")]
    clusters = ["x", "x", "y", "z", "z"]
    got = win_rate(games, clusters, n_boot=500, seed=3)
    assert got.value == pytest.approx((2 + 0.5 + 1 + 0 + 2) / 10)
    # independently: cluster totals resampled with numpy's PCG64
    totals = {"x": (2.5, 4), "y": (1.0, 2), "z": (2.0, 4)}
    names = ["x", "y", "z"]
    draws = np.random.default_rng(3).integers(0, 3, size=(500, 3))
    wins = np.array([totals[n][0] for n in names])[draws].sum(1)
    count = np.array([totals[n][1] for n in names])[draws].sum(1)
    assert (got.low, got.high) == pytest.approx(tuple(np.quantile(wins / count, [0.025, 0.975])))


def test_bradley_terry_equals_a_logistic_regression_on_the_outcomes() -> None:
    rng = np.random.default_rng(7)
    strength = {"base": 0.0, "m1": 0.8, "m2": -0.4, "m3": 1.5}
    labels_a_wins = ("A>>B", "A>B")
    battles = []
    for _ in range(400):
        a, b = rng.choice(list(strength), size=2, replace=False)
        p = 1 / (1 + math.exp(-(strength[a] - strength[b])))
        u = rng.random()
        label = ("A=B" if abs(u - p) < 0.05 else labels_a_wins[int(rng.random() < 0.7)] if u < p
                 else ("B>A", "B>>A")[int(rng.random() < 0.3)])
        battles.append(Battle(str(a), str(b), label))
    got = bradley_terry(battles, "base", strong_weight=3.0, n_boot=20, seed=0)

    # independent: one row per battle (ties as two half rows), weights 3 for strong verdicts
    others = ["m1", "m2", "m3"]
    rows, ys, ws = [], [], []
    for battle in battles:
        x = [float(battle.a == o) - float(battle.b == o) for o in others]
        if battle.label == "A=B":
            rows += [x, x]
            ys += [1, 0]
            ws += [0.5, 0.5]
        else:
            rows.append(x)
            ys.append(int(battle.label.startswith("A")))
            ws.append(3.0 if ">>" in battle.label else 1.0)
    fit = sm.GLM(np.array(ys), np.array(rows), family=sm.families.Binomial(), var_weights=np.array(ws)).fit()
    expected = {"base": 1000.0, **{o: 1000 + 400 / math.log(10) * c for o, c in zip(others, fit.params)}}
    assert {p: v["score"] for p, v in got.items()} == pytest.approx(expected, abs=1e-4)
    assert got["m3"]["rank"] == 1 and all(v["low"] <= v["score"] <= v["high"] for p, v in got.items() if p != "base")
