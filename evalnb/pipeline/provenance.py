"""What each stage notebook shows first: what the stage does for this run's benchmark, and
what produced the record (evalnb's version and commit, the packages that decide numbers,
the fingerprint, the routes). It is a notebook output, so the executed ``.ipynb`` carries it
itself, not only its rendered HTML.
"""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalnb.benchmarks.base import contestant_label
from evalnb.records.prompts import read_prompts
from evalnb.records.manifest import git_commit, package_versions
from evalnb.records.stores import read_json_if_exists
from evalnb.core.types import STAGES
from evalnb.evidence.failures import failure_rows

if TYPE_CHECKING:
    from evalnb.pipeline.run import Run

SHOWN_PACKAGES = ("evalnb", "openai", "anthropic", "google-genai", "papermill", "pandas", "numpy", "scipy",
                  "rouge-score")


@dataclass(frozen=True)
class About:
    """A stage's description and the run's provenance, as Markdown, HTML and plain text."""

    title: str
    description: str
    rows: Sequence[tuple[str, str]]
    prompts: Mapping[str, str] = field(default_factory=dict)   # the report's: each template whole

    def _repr_markdown_(self) -> str:
        table = "\n".join(f"| {k} | {v.replace('|', '/')} |" for k, v in self.rows)
        shown = "".join(f"\n**prompt: {name}** (`prompts/{name}.txt`)\n\n```text\n{text}\n```\n"
                        for name, text in self.prompts.items())
        return f"**{self.title}.** {self.description}\n\n| | |\n|---|---|\n{table}\n{shown}"

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>" for k, v in self.rows)
        shown = "".join(f"<details class='evalnb-prompt'><summary>prompt: {html.escape(name)} "
                        f"(<code>prompts/{html.escape(name)}.txt</code>)</summary><pre>{html.escape(text)}</pre></details>"
                        for name, text in self.prompts.items())
        return (f"<p><b>{html.escape(self.title)}.</b> {html.escape(self.description)}</p>"
                f"<table class='evalnb-about'>{rows}</table>{shown}")

    def __repr__(self) -> str:
        width = max((len(k) for k, _ in self.rows), default=0)
        lines = [f"{self.title}. {self.description}", *(f"{k.ljust(width)}  {v}" for k, v in self.rows)]
        lines += [f"--- prompt: {name} (prompts/{name}.txt) ---\n{text}" for name, text in self.prompts.items()]
        return "\n".join(lines)


def about(run: Run, stage: str) -> About:
    """What ``stage`` does for this run, then the run's summary and provenance."""
    if stage not in STAGES:
        raise ValueError(f"stage: expected one of {', '.join(STAGES)}, got {stage!r}")
    rows = [(str(k), str(v)) for k, v in run.summary()["value"].items() if k != "fingerprint"]   # whole below
    rows[0:0] = [("stage", f"{STAGES.index(stage) + 1} of {len(STAGES)}: {stage}")]
    rows += failure_rows(run.dir) + provenance_rows(run)   # why calls failed, first, where any did
    texts = read_prompts(run.dir)
    rows += [(f"prompt: {name}", f"prompts/{name}.txt ({len(text)} characters, sha256 {hashlib.sha256(text.encode()).hexdigest()[:16]})")
             for name, text in texts.items()]
    return About(f"{stage.capitalize()} · {run.config.benchmark}", run.benchmark.describe(stage), rows,
                 texts if stage == "report" else {})


def provenance_rows(run: Run) -> list[tuple[str, str]]:
    """Read from the manifest when a command already recorded them, else looked up here."""
    manifest = read_json_if_exists(run.path("manifest.json")) or {}
    packages = manifest.get("packages") or package_versions()
    commit = manifest.get("git_commit") if "packages" in manifest else git_commit(Path(__file__).resolve().parent)
    rows = [("evalnb", f"{packages.get('evalnb') or '?'}" + (f" (commit {commit})" if commit else " (no git checkout)")),
            ("packages", ", ".join(f"{name} {packages.get(name)}" for name in SHOWN_PACKAGES[1:]
                                   if packages.get(name)))]
    if manifest.get("python"):
        rows.append(("python", f"{manifest['python']} on {manifest.get('platform', '?')}"))
    rows.append(("fingerprint (sha256)", run.fingerprint["sha256"]))
    routes = manifest.get("routes") or {}
    for role, endpoint in [("model", run.config.model), *run.config.judge_roles()]:
        if role == "model" and (endpoint.provider == "none" or not run.benchmark.calls_model):   # nothing called
            label = contestant_label(run.benchmark, endpoint.provider, endpoint.name, run.config.options)
            rows.append(("route: model", f"no model called: answers read from {label}"))
            continue
        returned = ", ".join((routes.get(role) or {}).get("as_returned") or []) or "not reported yet"
        rows.append((f"route: {role}", f"{endpoint.provider}:{endpoint.name} (reported: {returned})"))
    return rows
