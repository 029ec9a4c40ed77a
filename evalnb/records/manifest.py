"""The run manifest: what produced these numbers (versions, commit, times, routes)."""

from __future__ import annotations

import functools
import hashlib
import platform
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from evalnb.records.stores import read_json_if_exists, write_json

PACKAGES = ("evalnb", "openai", "anthropic", "google-genai", "papermill", "nbclient",
            "nbconvert", "ipykernel", "pandas", "numpy", "scipy", "matplotlib", "rouge-score")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@functools.cache   # the environment of a process does not change while it runs
def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


@functools.cache
def git_commit(where: Path) -> str | None:
    """The evalnb checkout's commit (with ``-dirty`` when it has uncommitted changes)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if dirty else "")


def update_manifest(path: Path, *, environment: bool = True, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into the manifest (``stages`` merged per stage).

    ``environment``: record the package versions and commit again (a dozen metadata look-ups
    and two ``git`` processes). ``evalnb run`` records them once per command; its stage
    kernels, which run the same interpreter moments later, pass False.
    """
    manifest = read_json_if_exists(path) or {
        "created_at": utc_now(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }
    if environment or "packages" not in manifest:
        manifest["packages"] = dict(package_versions())
        manifest["git_commit"] = git_commit(Path(__file__).resolve().parent)
    stages = fields.pop("stages", None)
    manifest.update(fields)
    if stages:
        manifest.setdefault("stages", {}).update(stages)
    manifest["updated_at"] = utc_now()
    write_json(path, manifest)
    return manifest


def store_digest(path: Path) -> dict[str, Any] | None:
    """A stage store's sha256 and line count (None when absent): the manifest keeps them as
    aggregated, so that ``evalnb verify`` names a store changed since."""
    if not path.exists():
        return None
    data = path.read_bytes()
    return {"sha256": hashlib.sha256(data).hexdigest(), "lines": data.count(b"\n")}


NOTHING_TO_DO = "reruns_with_nothing_to_do"   # a stage entry's dates of executions that made no call


def stage_entry(path: Path, name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """What the manifest keeps for stage ``name`` that has just run: ``entry``; but when the
    stage made no call and changed no batch, the entry already there, its times kept (they say
    when the calls were made, and none was made now), with this execution's date added beside
    them under ``reruns_with_nothing_to_do``."""
    previous = ((read_json_if_exists(path) or {}).get("stages") or {}).get(name)
    batches = ("modes", "batches")
    if (not previous or entry.get("new_records")
            or any(entry.get(k) != previous.get(k) for k in batches)):
        return entry
    return previous | {NOTHING_TO_DO: [*previous.get(NOTHING_TO_DO, []), entry["finished_at"]]}


def add_rerun(path: Path, entry: dict[str, Any]) -> None:
    """``entry`` appended to the manifest's ``reruns`` (one per later ``evalnb run`` whose
    settings differ from the recorded ``config.json``), every other field as it was: its
    times are not this invocation's to change."""
    manifest = read_json_if_exists(path) or {}
    manifest["reruns"] = [*manifest.get("reruns", []), entry]
    write_json(path, manifest)
