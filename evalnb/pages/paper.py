"""A paper's copy of an executed record, without the machine it ran on.

What :func:`paper_copy` changes in the notebook (the run's own record is never touched):

- every absolute path in an output becomes relative to the record's folder (``.``, ``../RUN``
  for a compared run beside it); a path outside the outputs (a data or prompt file on the
  machine) becomes its file name, which the record's fingerprint identifies by hash;
- a cell's stray return value (a bare ``PosixPath(...)``) is dropped;
- the provenance is shown once: the block at the top of the page; each stage's ``about`` cell
  keeps its title and description, not its provenance table;
- a section (a ``## `` heading and the cells up to the next) whose every output is an empty
  table (``class="evalnb-empty"``) or nothing is left out, and one line under the provenance
  names the sections left out and why each was empty;
- the prompt templates of the record (``prompts/``) go in an appendix at the end.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nbformat

from evalnb.core.data_uris import outside_data_uris
from evalnb.records.prompts import read_prompts

_NOTE = 'class="evalnb-note"'
_EMPTY = re.compile(r'<p class="evalnb-empty">(.*?)</p>', re.S)
_STRAY = re.compile(r"^(Posix|Windows)?Path\(.*\)$", re.S)
# An absolute POSIX path of at least two parts, not inside a URL, a word or base64 text.
_ABSOLUTE = re.compile(r"(?<![\w.:/~+=,%-])/(?:[\w.@+-]+/)+[\w.@+-]*")
TEXT_MIMES = ("text/plain", "text/html", "text/markdown", "text/latex")


def relative_paths(text: str, folder: Path, roots: Sequence[Path]) -> str:
    """``text`` with absolute paths made relative to ``folder``: those under one of ``roots``
    (the record's folder, the folder of the runs beside it) as relative paths, any other as its
    file name. Base64 data (an embedded image) is left alone."""
    resolved = [str(r.resolve()) for r in roots]

    def replace(match: re.Match[str]) -> str:
        path = match.group(0)
        trail = "/" if path.endswith("/") else ""
        clean = path.rstrip("/")
        if any(clean == r or clean.startswith(r + "/") for r in resolved):
            return os.path.relpath(clean, folder) + trail
        return Path(clean).name + trail
    return outside_data_uris(text, lambda stretch: _ABSOLUTE.sub(replace, stretch))


def _texts(output: Any) -> list[str]:
    if output.get("output_type") == "stream":
        return [output.get("text", "")]
    if output.get("output_type") == "error":
        return [output.get("evalue", "")]
    data = output.get("data") or {}
    return [_join(data[m]) for m in TEXT_MIMES if m in data]


def _join(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _scrub(output: Any, folder: Path, roots: Sequence[Path]) -> None:
    if output.get("output_type") == "stream":
        output["text"] = relative_paths(_join(output["text"]), folder, roots)
    elif output.get("output_type") == "error":
        output["evalue"] = relative_paths(output.get("evalue", ""), folder, roots)
        output["traceback"] = [relative_paths(t, folder, roots) for t in output.get("traceback", [])]
    for mime in TEXT_MIMES:
        if mime in (output.get("data") or {}):
            output["data"][mime] = relative_paths(_join(output["data"][mime]), folder, roots)


def _stray(output: Any) -> bool:
    data = output.get("data") or {}
    if output.get("output_type") == "display_data" and not data:   # a cleared progress bar
        return True
    return output.get("output_type") == "execute_result" and set(data) == {"text/plain"} and \
        bool(_STRAY.match(_join(data["text/plain"]).strip()))


def _neutral(cell: Any) -> bool:
    """A cell whose output is a note about the record (what was saved), not a result."""
    return cell.cell_type == "code" and any(_NOTE in t for o in cell.get("outputs", []) for t in _texts(o))


def _empty_reason(cells: Sequence[Any]) -> str | None:
    """Why a section shows nothing (its empty tables' own words), or None when it shows
    something (or holds no code: prose only)."""
    reasons: list[str] = []
    code = [c for c in cells if c.cell_type == "code" and not _neutral(c)]
    if not code:
        return None
    for cell in code:
        if not _ran(cell):   # never ran: not "empty", just not there (the run does not render)
            return None
        for output in cell.get("outputs", []):
            found = _EMPTY.search(_join((output.get("data") or {}).get("text/html", "")))
            if found is None:
                return None
            reasons.append(html.unescape(found.group(1)))
    return "; ".join(dict.fromkeys(reasons)) or "nothing to show"


def _ran(cell: Any) -> bool:
    """The cell was executed to its end (papermill's status; a notebook run by hand: its count)."""
    status = (cell.metadata.get("papermill") or {}).get("status")
    return status == "completed" if status else cell.get("execution_count") is not None


def _about(cell: Any) -> None:
    """An ``about`` cell's output cut to its title and description (the provenance is on top)."""
    for output in cell.get("outputs", []):
        data = output.get("data") or {}
        if "text/markdown" in data:
            head = _join(data["text/markdown"]).split("\n\n| |")[0]
            output["data"] = {"text/markdown": head, "text/plain": head}


def _heading(cell: Any) -> str | None:
    if cell.cell_type != "markdown" or not cell.source.startswith("## "):
        return None
    return cell.source.splitlines()[0][3:].strip()


def paper_copy(notebook: Path, header: str, roots: Sequence[Path], prompts_from: Path) -> Any:
    """The notebook at ``notebook`` as a paper shows it (see the module): ``roots``, the folders
    whose paths are shown relative; ``prompts_from``, the run whose prompts the appendix shows."""
    nb: Any = nbformat.read(notebook, as_version=4)
    folder = notebook.parent.resolve()
    cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    for cell in cells:
        if cell.cell_type != "code":
            continue
        if "evalnb.about(" in cell.source:
            _about(cell)
        cell.outputs = [o for o in cell.get("outputs", []) if not _stray(o)]
        for output in cell.outputs:
            _scrub(output, folder, roots)
    kept: list[Any] = []
    left_out: list[str] = []
    i = 0
    while i < len(cells):
        title = _heading(cells[i])
        if title is None:
            kept.append(cells[i])
            i += 1
            continue
        end = next((j for j in range(i + 1, len(cells)) if _heading(cells[j]) is not None), len(cells))
        reason = _empty_reason(cells[i + 1:end])
        if reason is None:
            kept += cells[i:end]
        else:
            left_out.append(f"{title} ({reason.rstrip('.')})")
            kept += [c for c in cells[i + 1:end] if _neutral(c)]
        i = end
    note = f"\n\nLeft out as empty: {'; '.join(left_out)}." if left_out else ""
    kept.insert(0, nbformat.v4.new_markdown_cell(header + note, id="evalnb-provenance"))
    appendix = prompts_appendix(prompts_from)
    if appendix:
        kept.append(nbformat.v4.new_markdown_cell(appendix, id="evalnb-prompts"))
    nb.cells = kept
    return nb


def prompts_appendix(run_dir: Path) -> str:
    """Markdown: every prompt template the run recorded, whole (none: empty)."""
    texts = read_prompts(run_dir)
    if not texts:
        return ""
    fence = "````"   # a template may itself hold a ``` block
    parts = [f"## Appendix: prompts\n\nThe templates as sent, placeholders unfilled (`prompts/` in the run "
             f"`{run_dir.name}`; their hashes are in its `fingerprint.json`)."]
    parts += [f"**{name}**\n\n{fence}text\n{text}\n{fence}" for name, text in texts.items()]
    return "\n\n".join(parts)
