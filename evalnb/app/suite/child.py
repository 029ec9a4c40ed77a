"""An ``evalnb`` command that ``evalnb suite`` starts (a contestant's ``run PARAMS``, the
leaderboard's ``compare --params FILE``) in a process that dies with the suite.

``python -m evalnb.app.suite.child SUITE_PID COMMAND ARGS...``. The OS is asked to SIGKILL this process
when its parent dies (``PR_SET_PDEATHSIG``, :func:`evalnb.records.lock.die_with_parent`; the
request survives the exec of this interpreter), and the run's kernel dies with this process
in turn, so a SIGKILL of the suite alone stops every run it started. A parent that died before
the request took effect is seen at once (the parent pid changed) and nothing runs.
"""

from __future__ import annotations

import os
import sys

from evalnb.app.main import command
from evalnb.records.lock import die_with_parent


def start() -> None:
    parent, argv = int(sys.argv[1]), sys.argv[2:]
    die_with_parent()
    if os.getppid() != parent:
        os._exit(1)
    sys.argv = ["evalnb", *argv]
    command()


if __name__ == "__main__":
    start()
