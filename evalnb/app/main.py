"""``evalnb``: run the stage notebooks through papermill and report the run's state.

Exit status: 0 complete; 2 something resumable remains (a transient generation failure, a
judge failure); 1 a configuration or data error, or a stage that failed. papermill cannot
exit 2 by itself, so the aggregate stage writes ``status.json`` and this command reads it.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from evalnb.app import EXIT_ERROR
from evalnb.core.errors import EvalnbError
from evalnb.core.redaction import redact
from evalnb.core.types import STAGES


def _skip_iri_grammar() -> None:
    """nbformat imports jsonschema, which imports ``rfc3987_syntax`` when it is installed
    (jupyterlab brings it), and that module builds an Earley parser per IRI term at import:
    3-7 s on this machine, for a format check no notebook schema uses. This command's
    process is ours to configure; a library import of evalnb never does this."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


def command() -> NoReturn:
    """The ``evalnb`` console script: :func:`main` in a process that is evalnb's own.

    Once :func:`main` has returned, every file is closed, the kernel stopped and the HTML
    thread joined; what remains is the interpreter tearing down some 1,100 modules, a third
    of a second of nothing. The process ends without it (``os._exit``, streams flushed
    first), as it does on an exception only through the normal path."""
    _skip_iri_grammar()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evalnb", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run (or resume) the stage notebooks for a parameters file")
    run_p.add_argument("params", type=Path)
    run_p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                       help="override a parameter (dotted keys, YAML values); repeatable")
    run_p.add_argument("--stage", choices=STAGES, action="append",
                       help="run only this stage (repeatable), even when it has nothing to do; default: all four "
                            "in order, each skipped when its record stands and it has nothing to do")
    run_p.add_argument("--wait", action="store_true",
                       help="batch mode: poll batches in flight until they finish (default: poll once, exit 2 "
                            "while any is running)")
    run_p.add_argument("--poll-interval", type=float, default=60.0, metavar="SECONDS",
                       help="seconds between polls with --wait (default 60)")
    for name, text in (("estimate", "print the calls, tokens and cost a run will make (no call)"),
                       ("probe-window", "probe the model's context window in characters")):
        p = sub.add_parser(name, help=text)
        p.add_argument("params", type=Path)
        p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
        if name == "probe-window":
            p.add_argument("--max-calls", type=int, default=40, help="per text kind (default 40)")
            p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                           help="the probes' output budget (default 16: an accepted probe costs a word)")
    cmp_p = sub.add_parser("compare", help="compare finished runs of one benchmark (leaderboard, paired "
                                           "differences, judge agreement, rubric analysis)")
    cmp_p.add_argument("runs", type=Path, nargs="*")
    cmp_p.add_argument("--out", type=Path)
    cmp_p.add_argument("--params", type=Path, help="a file with runs: [...] and options")
    cmp_p.add_argument("--n-boot", type=int, dest="n_boot")
    cmp_p.add_argument("--seed", type=int)
    cmp_p.add_argument("--threshold", type=float, help="judges disagree above this difference (0.2)")
    status_p = sub.add_parser("status", help="a run's state and its batches (batch mode), read from the run "
                                             "directory without touching anything")
    status_p.add_argument("run_dir", type=Path)
    render_p = sub.add_parser("render", help="paper-ready HTML of every executed notebook in a run or compare")
    render_p.add_argument("folder", type=Path)
    render_p.add_argument("--no-input", action="store_true", help="hide the code cells")
    export_p = sub.add_parser("export", help="a run's or compare's tables (headline, leaderboard, paired "
                                             "differences, judge agreement) as LaTeX, Markdown or CSV")
    export_p.add_argument("folder", type=Path, help="a run directory or a compare directory")
    export_p.add_argument("--format", choices=("latex", "markdown", "csv"), default="latex")
    export_p.add_argument("-o", "--output", type=Path, help="the file (for csv: a folder, one file per table); "
                                                            "default: standard output")
    export_p.add_argument("--decimals", type=int, help="decimals of an estimate (default 3; more where an interval "
                                                       "is narrower)")
    demo_p = sub.add_parser("demo", help="run the shipped samples through the offline baselines")
    demo_p.add_argument("--outputs", type=Path, default=Path("outputs"))
    show_p = sub.add_parser("show", help="print one item's evidence (question, response, verdicts ...) from a run")
    show_p.add_argument("run_dir", type=Path)
    show_p.add_argument("item_id")
    init_p = sub.add_parser("init", help="copy the stage notebooks, example parameters and sample data into "
                                         "a folder, ready for JupyterLab")
    init_p.add_argument("folder", type=Path, nargs="?", default=Path("."), help="default: the current directory")
    init_p.add_argument("--force", action="store_true", help="overwrite files that differ")
    verify_p = sub.add_parser("verify", help="recompute a run (or compare, or pack archive) from its stores and "
                                             "inputs and check every number it reports; exit 1 on any discrepancy, 2 when "
                                             "nothing differs but something could not be checked")
    verify_p.add_argument("target", type=Path, help="a run directory, a compare directory, or an archive from pack")
    verify_p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=PATH",
                          help="where an input is now (data, corpus, responses ...), when not at its recorded path")
    pack_p = sub.add_parser("pack", help="one archive (.tar.gz or .zip) of a run's record, with SHA256SUMS")
    pack_p.add_argument("run_dir", type=Path)
    pack_p.add_argument("-o", "--output", type=Path, help="the archive (default: RUN_DIR.tar.gz beside it)")
    suite_p = sub.add_parser("suite", help="run (or resume) every contestant of a suite file, then its leaderboard")
    suite_p.add_argument("suite_file", type=Path)
    suite_p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                         help="override a shared parameter of the suite (dotted keys, YAML values); repeatable")
    from evalnb.app import plan
    plan.add_parser(sub)
    args = parser.parse_args(argv)
    # Each command's module is imported only when it runs: `evalnb run` starts its kernel
    # before it imports the stages, and `evalnb status` never imports them.
    if args.command == "init":
        from evalnb.app.demo import init_command
        return init_command(args.folder, args.force)
    try:
        if args.command == "run":
            from evalnb.app.run import execute_stages
            stages = [s for s in STAGES if s in (args.stage or STAGES)]
            return execute_stages(args.params, args.sets, stages,
                                  wait=args.poll_interval if args.wait else None, forced=bool(args.stage))
        if args.command in ("estimate", "probe-window", "show"):
            from evalnb.app import inspection
            if args.command == "estimate":
                return inspection.estimate_command(args.params, args.sets)
            if args.command == "probe-window":
                return inspection.probe_command(args.params, args.sets, args.max_calls, args.max_tokens)
            return inspection.show_command(args.run_dir, args.item_id)
        if args.command in ("compare", "render"):
            from evalnb.app import compare
            if args.command == "compare":
                return compare.compare_command(args.runs, args.out, args.params,
                                               {"n_boot": args.n_boot, "seed": args.seed,
                                                "threshold": args.threshold})
            return compare.render_command(args.folder, args.no_input)
        if args.command == "export":
            from evalnb.app.compare import export_command
            return export_command(args.folder, args.format, args.output, args.decimals)
        if args.command == "status":
            from evalnb.app.run import status_command
            return status_command(args.run_dir)
        if args.command == "suite":
            from evalnb.app.suite import suite_command
            return suite_command(args.suite_file, args.sets)
        if args.command == "verify":
            from evalnb.app.verify import verify_command
            return verify_command(args.target, args.sets)
        if args.command == "plan":
            return plan.plan_command(args)
        if args.command == "pack":
            from evalnb.app.pack import pack_command
            return pack_command(args.run_dir, args.output)
        from evalnb.app.demo import demo
        return demo(args.outputs.resolve())
    except EvalnbError as e:
        print(f"evalnb: error: {redact(str(e))}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:   # a path the checks could not foresee (a full disk, a race)
        print(f"evalnb: error: {redact(f'{type(e).__name__}: {e}')}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(command())
