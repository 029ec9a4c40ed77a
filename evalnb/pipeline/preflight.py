"""Checks made before a run writes anything: each failure is one line naming the parameter.

The data and corpus readers check their own files; this module checks what no reader
opens: that the paths are the kind they should be and that the output directory can be
created and written.
"""

from __future__ import annotations

import os
from pathlib import Path

from evalnb.core.run_config import RunConfig
from evalnb.core.errors import ConfigError


def check_paths(config: RunConfig, source: str) -> None:
    check_input(config.data, "data", source, want_dir=False)
    if config.corpus is not None:
        check_input(config.corpus, "corpus", source, want_dir=True)
    check_output_dir(config.output_dir, "output_dir", source)


def check_input(path: Path, key: str, source: str, *, want_dir: bool) -> None:
    kind = "directory" if want_dir else "file"
    if not path.exists():
        raise ConfigError(f"{source}: {key}: {path} not found (expected a {kind})")
    if want_dir != path.is_dir():
        raise ConfigError(f"{source}: {key}: {path} is a {'file' if want_dir else 'directory'}, "
                          f"expected a {kind}")
    if not os.access(path, os.R_OK | (os.X_OK if want_dir else 0)):
        raise ConfigError(f"{source}: {key}: {path} cannot be read (permission denied)")


def check_output_dir(path: Path, key: str, source: str) -> None:
    """The directory exists and is writable, or its nearest existing ancestor is a writable
    directory (so it can be created)."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{source}: {key}: {path} cannot be created: {existing} is a file, "
                          "not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "written" if existing == path else f"created ({existing} is not writable)"
        raise ConfigError(f"{source}: {key}: {path} cannot be {what}")
