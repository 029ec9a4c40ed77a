"""Paper-ready HTML: every executed notebook of a run (or a compare), self-contained, with
the injected-parameters cell removed, a provenance block at the top, nothing of the machine it
ran on (:mod:`evalnb.pages.paper`), and the tables as LaTeX, Markdown and CSV beside it
(:mod:`evalnb.pages.exports`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
from nbconvert import HTMLExporter

from evalnb.records.call_times import call_times_text, run_call_times
from evalnb.records.fingerprint import thing_names
from evalnb.records.stores import read_json_if_exists, write_text

# Scripts that load code from a CDN (require.js, MathJax, mermaid): the page must stand alone.
_REMOTE_SCRIPT = re.compile(r'<script\b[^>]*\bsrc="https?://[^"]*"[^>]*>\s*</script>'
                            r'|<script\b[^>]*>(?:(?!</script>).)*?https?://cdn(?:(?!</script>).)*</script>', re.I | re.S)


def _run_provenance(run_dir: Path) -> list[str]:
    manifest = read_json_if_exists(run_dir / "manifest.json") or {}
    fingerprint = read_json_if_exists(run_dir / "fingerprint.json") or {}
    scores = read_json_if_exists(run_dir / "scores.json") or {}
    packages = ", ".join(f"{k} {v}" for k, v in (manifest.get("packages") or {}).items() if v)
    lines = [f"**Run** `{run_dir.name}` · benchmark `{scores.get('benchmark', '?')}` · "
             f"fingerprint `{fingerprint.get('sha256', '?')[:16]}`"]
    if scores.get("label"):
        lines.append(f"**{scores['label']}**")
    for role, route in (manifest.get("routes") or {}).items():
        if route.get("provider") == "none":   # answers read from a file: no endpoint
            lines.append(f"- {role}: no model called; answers read from `{_contestant(scores)}`")
            continue
        returned = ", ".join(route.get("as_returned") or []) or "-"
        lines.append(f"- {role}: `{route.get('provider')}:{route.get('as_sent')}` (endpoint reported: {returned})")
    # When the calls were made, from the stores' records: not when a stage notebook last ran.
    lines.append("- endpoint dates (UTC, first to last call, from the stores): " + call_times_text(run_call_times(run_dir)))
    lines.append(f"- evalnb commit `{manifest.get('git_commit') or 'unknown'}`; Python {manifest.get('python', '?')}; {packages}")
    return lines


def _contestant(scores: dict[str, Any]) -> str:
    from evalnb.benchmarks import benchmark_for
    from evalnb.benchmarks.base import contestant_label

    config = scores.get("config") or {}
    model = config.get("model") or {}
    return contestant_label(benchmark_for(scores["benchmark"], "render"), model.get("provider", "none"),
                            model.get("name", "none"), config)


def _compared(folder: Path) -> list[Path]:
    compared = read_json_if_exists(folder / "compare.json")
    return [Path(r["dir"]) for r in compared["runs"]] if compared else []


def provenance(folder: Path) -> str:
    """Markdown: what produced these numbers (for a compare, for each compared run)."""
    compared = read_json_if_exists(folder / "compare.json")
    dirs = _compared(folder) or [folder]
    blocks = ["\n".join(_run_provenance(d)) for d in dirs]
    head = "## Provenance\n\n"
    if compared:
        head += (f"Comparison of {len(dirs)} runs of `{compared['benchmark']}` (agreeing on "
                 f"{', '.join(thing_names(compared['comparable_parts']))}); bootstrap n_boot={compared['n_boot']}, "
                 f"seed={compared['seed']}.\n\n")
    return head + "\n\n".join(blocks)


def record_html(notebook: Path) -> Path:
    """The executed record as HTML beside it, exactly as executed (the run's own copy)."""
    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    target = notebook.with_suffix(".html")
    write_text(target, body)   # whole or not at all
    return target


def render_notebook(notebook: Path, target: Path, *, no_input: bool, header: str) -> Path:
    """A paper's copy: the provenance block first, the injected parameters removed, no path of
    the machine, empty sections left out, the prompts in an appendix; self-contained."""
    from evalnb.pages.paper import paper_copy

    folder = notebook.parent.resolve()
    runs = _compared(folder)
    nb = paper_copy(notebook, header, [folder, *runs, folder.parent], runs[0] if runs else folder)
    exporter = HTMLExporter(exclude_input=no_input, exclude_input_prompt=no_input,
                            exclude_output_prompt=no_input, embed_images=True)
    body, _ = exporter.from_notebook_node(nb)
    # Self-contained: drop remote scripts (MathJax, require.js); figures are embedded PNGs.
    body = _REMOTE_SCRIPT.sub("", body)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_text(target, body)   # whole or not at all
    return target


def render_folder(folder: Path, *, no_input: bool = False) -> list[Path]:
    """Every executed notebook in ``folder`` to ``folder/paper/NAME.html``, and the tables as
    ``paper/tables.tex``, ``tables.md`` and the CSV files beside them."""
    from evalnb.pages.exports import write_paper_tables

    header = provenance(folder)
    pages = [render_notebook(nb, folder / "paper" / nb.with_suffix(".html").name, no_input=no_input, header=header)
             for nb in sorted(folder.glob("*.ipynb"))]
    if pages:
        write_paper_tables(folder, folder / "paper")
    return pages
