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

    try:
        table = plan(args.pilot, delta=args.delta, power=args.power, alpha=args.alpha, rho=args.rho)
    except ValueError as e:   # alpha or power outside (0, 1)
        raise ConfigError(f"plan: {e}") from None
    print(f"To detect a difference of {args.delta:g} at two-sided alpha {args.alpha:g} with power {args.power:g}:")
    with pd.option_context("display.width", 200, "display.max_columns", 40):
        print(pd.DataFrame(table).drop(columns=["delta", "alpha", "power"]).to_string())
    return EXIT_OK
