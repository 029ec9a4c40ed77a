"""``evalnb``: run the stage notebooks through papermill and report the run's state.

The arguments are described in :mod:`evalnb.app.parser`; what a command prints follows
:mod:`evalnb.app.output`. Exit status: 0 complete; 2 something resumable remains (a transient
generation failure, a judge failure); 1 a usage, configuration or data error, an endpoint that refused
for reasons of its own (a wrong key, model or route, an exhausted account), or a
stage that failed; 130 interrupted (Ctrl-C). papermill cannot exit 2 by itself, so the aggregate stage
writes ``status.json`` and this command reads it.
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


def _one_interrupt() -> None:
    """Ctrl-C stops the command once: the first SIGINT raises KeyboardInterrupt, and the ones
    after it (a user pressing again while the kernel and the calls are stopped) are ignored,
    so the unwinding that keeps the record whole is never cut short. What the interrupted
    event loops leave for the garbage collector to log (``Task exception was never retrieved``)
    is not shown: the one line :func:`main` prints says what happened."""
    import logging
    import signal

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        logging.getLogger("asyncio").setLevel(logging.CRITICAL + 1)
        logging.getLogger("papermill").setLevel(logging.CRITICAL + 1)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupt)


def command() -> NoReturn:
    """The ``evalnb`` console script: :func:`main` in a process that is evalnb's own.

    Once :func:`main` has returned, every file is closed, the kernel stopped and the HTML
    thread joined; what remains is the interpreter tearing down some 1,100 modules, a third
    of a second of nothing. The process ends without it (``os._exit``, streams flushed
    first), as it does on an exception only through the normal path."""
    _skip_iri_grammar()
    _one_interrupt()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    from evalnb.app import output
    from evalnb.app.parser import build_parser

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:   # --help, --version (0) and usage errors (1, never 2: 2 means resumable)
        return e.code if isinstance(e.code, int) else EXIT_ERROR
    output.configure(args.verbosity, getattr(args, "json", False))
    try:
        return _dispatch(args)
    except KeyboardInterrupt:   # Ctrl-C: the kernels and calls are stopped by now (the finally blocks)
        print(f"evalnb: {output.interrupted_line()}", file=sys.stderr)
        return output.EXIT_INTERRUPTED


def _dispatch(args: argparse.Namespace) -> int:
    # Each command's module is imported only when it runs: `evalnb run` starts its kernel
    # before it imports the stages, and `evalnb status` never imports them.
    if args.command == "init":
        from evalnb.app.demo import init_command
        return init_command(args.folder, args.force)
    try:
        if args.command in ("run", "estimate"):   # --limit/--items: a run directory of its own
            from evalnb.app.runs.subset import subset_sets
            args.sets = subset_sets(args.params, args.sets, args.limit, args.items)
        if args.command in ("run", "suite"):
            from evalnb.app.parser import no_cache_sets
            args.sets = [*args.sets, *no_cache_sets(args.no_cache)]
        if args.command == "run":
            from evalnb.app.runs.command import execute_stages
            stages = [s for s in STAGES if s in (args.stage or STAGES)]
            return execute_stages(args.params, args.sets, stages,
                                  wait=args.poll_interval if args.wait else None, forced=bool(args.stage))
        if args.command == "prompt":
            from evalnb.app.inspection.prompt import prompt_command
            return prompt_command(args.params, args.sets, args.item_id, args.role)
        if args.command in ("estimate", "probe-window", "show"):
            from evalnb.app.inspection import commands as inspection
            if args.command == "estimate":
                return inspection.estimate_command(args.params, args.sets, args.wide)
            if args.command == "probe-window":
                return inspection.probe_command(args.params, args.sets, args.max_calls, args.max_tokens)
            return inspection.show_command(args.run_dir, args.item_id)
        if args.command in ("compare", "render"):
            from evalnb.app.record import compare
            if args.command == "compare":
                return compare.compare_command(args.runs, args.out, args.params,
                                               {"n_boot": args.n_boot, "seed": args.seed,
                                                "threshold": args.threshold, "max_failed": args.max_failed,
                                                "panels": [[str(Path(r).resolve()) for r in side.split(",") if r]
                                                           for side in args.panels] if args.panels else None})
            return compare.render_command(args.folder, args.no_input)
        if args.command == "export":
            from evalnb.app.record.compare import export_command
            return export_command(args.folder, args.format, args.output, args.decimals, args.fit, args.columns)
        if args.command == "status":
            from evalnb.app.inspection.status import status_command
            return status_command(args.run_dir)
        if args.command == "suite":
            from evalnb.app.suite.command import suite_command
            return suite_command(args.suite_file, args.sets)
        if args.command == "verify":
            from evalnb.app.record.verify import verify_command
            return verify_command(args.target, args.sets)
        if args.command == "cache":
            from evalnb.app.inspection.cache_command import cache_command
            return cache_command(args.path, args.older_than, args.model, args.clear)
        if args.command == "plan":
            from evalnb.app.inspection import plan
            return plan.plan_command(args)
        if args.command == "pack":
            from evalnb.app.record.pack import pack_command
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
