"""Where evalnb runs, as far as a person would name it: a Jupyter kernel (and its notebook)
or a command line.

Read only: nothing here imports IPython (it is looked up among the modules already loaded,
so a plain script never pays for it) or changes any state.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

# jupyter-server starts every kernel of a notebook session with the notebook's path in this
# variable (ipykernel copies it into the namespace as ``__session__``).
SESSION_ENV = "JPY_SESSION_NAME"


def shell() -> Any:
    """The running IPython shell, or None (IPython not loaded, or not running)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def in_kernel() -> bool:
    """True in a Jupyter kernel (JupyterLab, nbclient, papermill), False in a terminal IPython
    or plain Python: only a kernel's shell has a ``kernel``."""
    return getattr(shell(), "kernel", None) is not None


def notebook_path() -> str | None:
    """The notebook this kernel was started for, where the frontend says so (jupyter-server
    does; papermill and nbclient do not)."""
    if not in_kernel():
        return None
    found = os.environ.get(SESSION_ENV) or (getattr(shell(), "user_ns", None) or {}).get("__session__")
    return str(found) if found else None


def command_line(argv: list[str] | None = None) -> str:
    """This process's command line as its user typed it: ``evalnb run params/x.yaml``, not
    ``/abs/.venv/bin/evalnb ...`` or ``.../evalnb/app/main.py ...``."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return Path(sys.executable).name
    program = Path(argv[0])
    if program.name == "evalnb" or program.as_posix().endswith(("evalnb/app/main.py", "evalnb/__main__.py")):
        words = ["evalnb"]
    elif program.name == "__main__.py":   # python -m package
        words = [Path(sys.executable).name, "-m", program.parent.name]
    else:
        words = [program.name or argv[0]]
    return shlex.join([*words, *argv[1:]])
