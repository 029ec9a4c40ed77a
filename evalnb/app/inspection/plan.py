"""``evalnb plan PILOT --delta 0.03 [--power 0.8] [--alpha 0.05] [--rho 0.5]``: the items, clusters
and repeats needed to detect a difference, from a pilot run or compare folder
(:func:`evalnb.comparison.planning.plan`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from evalnb.app import EXIT_OK


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="from a pilot run or compare folder: the items (documents, repeats) needed to "
                                    "detect a difference")
    p.add_argument("pilot", type=Path, help="a finished run directory or a compare folder (compare.json)")
    p.add_argument("--delta", type=float, required=True, help="the difference to detect, e.g. 0.03")
    p.add_argument("--power", type=float, default=0.8, help="the power wanted (default 0.8)")
    p.add_argument("--alpha", type=float, default=0.05, help="two-sided level (default 0.05)")
    p.add_argument("--rho", type=float, default=0.5,
                   help="one run only: the assumed correlation of two models' item scores (default 0.5)")


def plan_command(args: argparse.Namespace) -> int:
    import pandas as pd

    from evalnb.core.errors import ConfigError
    from evalnb.comparison.planning import plan
    from evalnb.views.tables import Layout, paper_view, view_text

    try:
        table = plan(args.pilot, delta=args.delta, power=args.power, alpha=args.alpha, rho=args.rho)
    except ValueError as e:   # alpha or power outside (0, 1)
        raise ConfigError(f"plan: {e}") from None
    print(f"To detect a difference of {args.delta:g} at two-sided alpha {args.alpha:g} with power {args.power:g}:")
    rows = leaderboard_order(pd.DataFrame(table).reset_index(), args.pilot)
    words = metric_words_of(args.pilot)
    print(view_text(paper_view(rows.drop(columns=["delta", "alpha", "power"]),
                               Layout(fractions=("var_d", "design_effect", "mde_now", "omega2", "sigma2_a", "sigma2_b"),
                                      values={"metric": words}))))
    return EXIT_OK


def leaderboard_order(rows: Any, pilot: Path) -> Any:
    """Each pair as the leaderboard orders it (model A the higher ranked), as the pairwise
    verdicts show it; the numbers are symmetric in the pair but for each side's own variance,
    which moves with its model."""
    from evalnb.records.stores import read_json_if_exists

    board = ((read_json_if_exists(Path(pilot) / "compare.json") or {}).get("tables") or {}).get("leaderboard") or []
    place = {row.get("model"): i for i, row in enumerate(board)}
    out = rows.copy()
    for i, row in rows.iterrows():
        if row["B"] in place and row["A"] in place and place[row["B"]] < place[row["A"]]:
            out.loc[i, ["A", "B"]] = [row["B"], row["A"]]
            if "sigma2_a" in rows:
                out.loc[i, ["sigma2_a", "sigma2_b"]] = [row["sigma2_b"], row["sigma2_a"]]
    metrics = list(dict.fromkeys(out["metric"]))
    ranks = {"_m": [metrics.index(m) for m in out["metric"]], "_a": [place.get(a, len(place)) for a in out["A"]],
             "_b": [place.get(b, len(place)) for b in out["B"]]}
    return out.assign(**ranks).sort_values(["_m", "_a", "_b"], kind="stable").drop(columns=["_m", "_a", "_b"]) \
        .reset_index(drop=True)


def metric_words_of(pilot: Path) -> dict[str, str]:
    """The pilot's metrics by the words the leaderboard uses for them."""
    from evalnb.benchmarks import benchmark_for
    from evalnb.records.stores import read_json_if_exists
    from evalnb.views.labels import metric_words

    record = read_json_if_exists(Path(pilot) / "compare.json") or read_json_if_exists(Path(pilot) / "scores.json") or {}
    return dict(metric_words(benchmark_for(record["benchmark"], "plan").metrics())) if record.get("benchmark") else {}
