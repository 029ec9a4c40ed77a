"""The ``evalnb`` command line's arguments: every subcommand with a description, an example,
and every argument explained; usage errors exit 1, never 2 (2 means resumable).

The dispatch is :mod:`evalnb.app.main`; this module only describes the commands.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

from evalnb.core.types import STAGES

EXIT_USAGE = 1   # a typo is an error like any other: a wrapper retrying on 2 must not loop on it

DESCRIPTION = """\
Run published LLM-benchmark protocols through parameterized stage notebooks
(generate, judge, aggregate, report), compare the runs, and keep every executed
notebook as the record.

  evalnb demo                               the shipped samples, offline, no key
  evalnb run params/demo_wildtrace.yaml     one run, resumable
  evalnb COMMAND --help                     a command's arguments and an example"""

EPILOG = """\
exit status:
  0    done: the run (or every run, or the command) is complete
  1    an error: a usage error, a configuration or data error (one line naming the
       file and field; nothing written), a directory in use, or a stage that failed
  2    resumable: work remains (a transient failure, a judge failure, batches still
       running, a spending ceiling reached); run the same command again to resume
  130  interrupted (Ctrl-C): what was recorded is kept; run the same command to resume"""

RUN_OPTIONS_HELP = {
    "set": "override a parameter, e.g. --set concurrency=32 or --set model.reasoning=true "
           "(dotted keys, YAML values); repeatable",
    "limit": "only the first N items of the data file, in file order, into a run directory of its own "
             "(RUN_NAME-limitN), to try an endpoint or a prompt before a full run",
    "items": "only these item ids (comma-separated), into a run directory of its own (RUN_NAME-items-HASH)",
}


class Parser(argparse.ArgumentParser):
    """argparse's parser, with usage errors exiting 1 and pointing to ``--help``."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\nTry '{self.prog} --help' for more.\n")


def _sub(sub: Any, name: str, summary: str, description: str, example: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=summary, description=f"{description}\n\nexample:\n  {example}",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    _loudness(p, argparse.SUPPRESS)   # -q/-v after the command too (`evalnb run p.yaml -q`)
    return p


def _loudness(p: argparse.ArgumentParser, default: Any) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=0, default=default,
                       help="less output: no live progress and no results table, only warnings, errors "
                            "and the line the command ends with")
    group.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=2, default=default,
                       help="more output: off a terminal, a progress line every 5 s and whenever what a "
                            "stage waits on changes (not only every 30 s)")


def _params(p: argparse.ArgumentParser, what: str = "the run's parameters file (YAML or JSON)") -> None:
    p.add_argument("params", type=Path, metavar="PARAMS", help=what)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help=RUN_OPTIONS_HELP["set"])


def _no_cache(p: argparse.ArgumentParser) -> None:
    p.add_argument("--no-cache", nargs="?", const="all", metavar="ROLE,...", dest="no_cache",
                   help="make every call fresh, never reusing an answer from the response cache (or only "
                        "these roles' calls, e.g. --no-cache model: the contestant fresh, the judges reused)")


def no_cache_sets(value: str | None) -> list[str]:
    """``--no-cache`` as the ``--set`` it stands for."""
    if value is None:
        return []
    if value == "all":
        return ["cache=false"]
    return [f"cache.fresh=[{','.join(r.strip() for r in value.split(',') if r.strip())}]"]


def _subset(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--limit", type=_positive, metavar="N", help=RUN_OPTIONS_HELP["limit"])
    group.add_argument("--items", type=_ids, metavar="ID,...", help=RUN_OPTIONS_HELP["items"])


def _json(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true",
                   help=f"print {what} as one JSON document on stdout (for scripts); messages stay on stderr")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _ids(text: str) -> list[str]:
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise argparse.ArgumentTypeError("expected one or more item ids, comma-separated")
    return ids


def build_parser() -> argparse.ArgumentParser:
    from evalnb import __version__

    parser = Parser(prog="evalnb", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"evalnb {__version__}")
    _loudness(parser, 1)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = _sub(sub, "run", "run (or resume) the stage notebooks for a parameters file",
             "Run the four stage notebooks (generate, judge, aggregate, report) in one kernel, with live\n"
             "progress, then print the headline metrics. Run the same command again to resume: what is\n"
             "recorded is never redone.", "evalnb run params/demo_wildtrace.yaml --limit 5")
    _params(p)
    p.add_argument("--stage", choices=STAGES, action="append",
                   help="run only this stage (repeatable), even when it has nothing to do; default: all four "
                        "in order, each skipped when its record stands and it has nothing to do")
    _subset(p)
    _no_cache(p)
    p.add_argument("--wait", action="store_true",
                   help="batch mode: poll batches in flight until they finish (default: poll once, exit 2 "
                        "while any is running)")
    p.add_argument("--poll-interval", type=float, default=60.0, metavar="SECONDS",
                   help="seconds between polls with --wait (default 60)")
    _json(p, "the results")

    p = _sub(sub, "estimate", "print the calls, tokens and cost a run will make (no call)",
             "What a run (or a suite) will call, how many tokens it sends and at most receives, and what\n"
             "it may cost at the configured prices. Makes no call and writes nothing.",
             "evalnb estimate params/wildtrace_example.yaml --wide")
    _params(p, "a run's parameters file, or a suite file")
    _subset(p)
    p.add_argument("--wide", action="store_true", help="every column (tokens in and out, measured latency, "
                                                       "batch prices), wider than 100 characters")

    p = _sub(sub, "probe-window", "probe the model's context window in characters",
             "Find the longest prompt the contestant accepts, by bisection over real calls, and print the\n"
             "caps entry to add to the parameters (also written to OUTPUT_DIR/window_probe.json).",
             "evalnb probe-window params/my.yaml --max-calls 20")
    _params(p)
    p.add_argument("--max-calls", type=int, default=40, metavar="N",
                   help="calls per text kind, English and CJK (default 40)")
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="the probes' output budget (default 16: an accepted probe costs a word)")

    p = _sub(sub, "prompt", "print the exact request an item's calls would send (no call)",
             "The request an item's contestant call would send (endpoint, route, settings, prompt), and\n"
             "each judge's request on the answer already recorded (or a placeholder). Makes no call.",
             "evalnb prompt params/demo_wildtrace.yaml wt-sample-01")
    _params(p)
    p.add_argument("item_id", metavar="ITEM", help="the item's id, as in the data file")
    p.add_argument("--role", metavar="ROLE", help="only this endpoint: model, judge1, judge2 ...")
    _json(p, "the requests")

    p = _sub(sub, "compare", "compare finished runs of one benchmark (leaderboard, paired differences, "
                             "judge agreement, rubric analysis)",
             "Run the compare notebook over complete runs of one benchmark whose fingerprints allow it,\n"
             "then print the ranking. Runs of a subset (--limit, --items) are never compared with others.",
             "evalnb compare outputs/run-a outputs/run-b --out outputs/compare-ab")
    p.add_argument("runs", type=Path, nargs="*", metavar="RUN_DIR", help="a complete run directory; two or more")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="where to write (default outputs/compare; an existing folder not written by "
                        "compare is refused)")
    p.add_argument("--params", type=Path, metavar="FILE", help="a file with runs: [...] and these options")
    p.add_argument("--n-boot", type=int, dest="n_boot", metavar="N",
                   help="bootstrap resamples for the intervals and paired differences (default 10000)")
    p.add_argument("--seed", type=int, metavar="N", help="the bootstrap's random seed (default 0)")
    p.add_argument("--threshold", type=float, metavar="X", help="judges disagree above this difference (0.2)")
    p.add_argument("--max-failed", type=float, dest="max_failed", metavar="SHARE",
                   help="refuse a run more than this share of whose items failed (default 0.5; a run whose "
                        "items all failed is always refused)")
    p.add_argument("--panels", nargs=2, metavar="RUN,RUN,...",
                   help="panel change: the same contestants scored by two panels, each a comma-separated "
                        "list of runs (the first is the leaderboard; the second is shown beside it only)")
    _json(p, "the ranking")

    p = _sub(sub, "status", "what a run, suite or compare directory holds, read from disk only",
             "What the directory is, each stage's calls done and their statuses, the headline numbers when\n"
             "there are some, spend against any ceiling, and what the next command would do. Reads only.",
             "evalnb status outputs/demo-wildtrace")
    p.add_argument("run_dir", type=Path, metavar="PATH", help="a run, suite or compare directory")

    p = _sub(sub, "render", "paper-ready HTML of every executed notebook in a run or compare",
             "Write paper-ready HTML of every executed notebook in the folder, under FOLDER/paper/.",
             "evalnb render outputs/demo-compare-wildtrace --no-input")
    p.add_argument("folder", type=Path, metavar="FOLDER", help="a run or compare directory")
    p.add_argument("--no-input", action="store_true", help="hide the code cells")

    p = _sub(sub, "export", "a run's or compare's tables as LaTeX, Markdown or CSV",
             "The headline table (a run), the leaderboard, paired differences and judge agreement (a compare),\n"
             "as booktabs LaTeX (one table environment each, with caption and label), Markdown, or CSV\n"
             "(raw numbers). `render` writes the same into FOLDER/paper/.",
             "evalnb export outputs/demo-compare-wildtrace --format latex -o tables.tex")
    p.add_argument("folder", type=Path, metavar="FOLDER", help="a run or compare directory")
    p.add_argument("--format", choices=("latex", "markdown", "csv"), default="latex", help="default: latex")
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="the file (for csv: a folder, one file per table); default: standard output")
    p.add_argument("--fit", choices=("text", "column", "landscape"), default="text",
                   help="LaTeX: fit each table to the text width (default), one column of a two-column paper, "
                        "or a landscape page")
    p.add_argument("--columns", metavar="A,B", type=lambda v: [c.strip() for c in v.split(",") if c.strip()],
                   help="the columns to show (machine names or headers; default: each table's short selection; "
                        "all: every column)")
    p.add_argument("--decimals", type=int, metavar="N",
                   help="decimals of an estimate (default 3; more where an interval is narrower)")

    p = _sub(sub, "demo", "run the shipped samples through the offline baselines",
             "Every shipped sample through the offline baselines from scratch (no key, no network), then\n"
             "two WildTrace runs compared and rendered for a paper.", "evalnb demo --outputs outputs")
    p.add_argument("--outputs", type=Path, default=Path("outputs"), metavar="DIR",
                   help="where the demo's runs go (default ./outputs; the demo's own folders are replaced)")
    _json(p, "every run's results and the comparison")

    p = _sub(sub, "show", "print one item's evidence (question, response, verdicts ...) from a run",
             "One item's evidence from a run: its question, the response, each verdict, its score.",
             "evalnb show outputs/demo-wildtrace wt-sample-01")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="an aggregated run directory")
    p.add_argument("item_id", metavar="ITEM", help="the item's id")

    p = _sub(sub, "init", "copy the stage notebooks, example parameters and sample data into a folder, "
                          "ready for JupyterLab",
             "Copy notebooks/, params/, data/ and examples/ into FOLDER.", "evalnb init my-evals")
    p.add_argument("folder", type=Path, nargs="?", default=Path("."), metavar="FOLDER",
                   help="default: the current directory")
    p.add_argument("--force", action="store_true", help="overwrite files that differ")

    p = _sub(sub, "verify", "recompute a run (or compare, or pack archive) from its stores and inputs and "
                            "check every number it reports; exit 1 on any discrepancy, 2 when nothing differs "
                            "but something could not be checked",
             "Recompute every number a record reports from its stores and inputs.",
             "evalnb verify outputs/demo-wildtrace")
    p.add_argument("target", type=Path, metavar="TARGET",
                   help="a run directory, a compare directory, or an archive from pack")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=PATH",
                   help="where an input is now (data, corpus, responses ...), when not at its recorded path")

    p = _sub(sub, "pack", "one archive (.tar.gz or .zip) of a run's record, with SHA256SUMS",
             "One archive of a run's record, with SHA256SUMS, that verify can check elsewhere.",
             "evalnb pack outputs/demo-wildtrace -o demo.tar.gz")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    p.add_argument("-o", "--output", type=Path, metavar="FILE",
                   help="the archive, .tar.gz or .zip (default: RUN_DIR.tar.gz beside it)")

    p = _sub(sub, "suite", "run (or resume) every contestant of a suite file, then its leaderboard",
             "Every contestant of a suite file as an ordinary run (parallel_runs at a time), with live\n"
             "progress per contestant, then the leaderboard.", "evalnb suite my-suite.yaml")
    p.add_argument("suite_file", type=Path, metavar="SUITE", help="the suite file (YAML or JSON)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a shared parameter of the suite (dotted keys, YAML values); repeatable")
    _no_cache(p)
    _json(p, "every contestant's results")

    p = _sub(sub, "cache", "show the response cache (size, entries, answers reused), prune it or clear it",
             "The response cache every run of this user shares: its folder, entries and size, and per\n"
             "endpoint the answers reused. --older-than and --model remove the entries they name.",
             "evalnb cache --older-than 90")
    p.add_argument("--path", type=Path, metavar="DIR", help="the cache folder (default: EVALNB_CACHE, else the "
                                                            "platform's cache folder)")
    p.add_argument("--older-than", type=float, dest="older_than", metavar="DAYS",
                   help="remove entries whose original call is older than this many days")
    p.add_argument("--model", metavar="NAME", help="remove the entries of this model")
    p.add_argument("--clear", action="store_true", help="remove every entry")

    from evalnb.app.inspection import plan   # its arguments are its own; the description and example are added here
    plan.add_parser(sub)
    p = sub.choices["plan"]
    p.description = ("From a pilot run or a compare folder, the items (documents, repeats) a run needs to detect\n"
                     "a difference of DELTA with the power asked for.\n\nexample:\n"
                     "  evalnb plan outputs/demo-compare-wildtrace --delta 0.05")
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    _loudness(p, argparse.SUPPRESS)
    return parser
