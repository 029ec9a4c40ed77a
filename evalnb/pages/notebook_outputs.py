"""The values an executed notebook shows, checked against those recomputed.

Each code cell of a stage (or compare) notebook ends with one call of evalnb (``run.summary()``,
``evalnb.headline(run)`` ...). That call is made again here on the recomputed run, its value
formatted as Jupyter formats a cell's value (IPython's display formatter, pandas with a
kernel's display options), and every output the notebook kept (``text/plain``,
``text/html``, ``image/png``) compared with it. The stage cells that made calls
(``evalnb.generate``, ``evalnb.judge``, ``evalnb.aggregate``) are never run again: the table
each one returned is rebuilt from the stores instead.

A cell this module does not know (one a researcher added) is counted as not checked.
A figure's pixels are compared only when this matplotlib is the one the run recorded: another
version draws other pixels from the same numbers. Otherwise its HTML is compared without the
image (the caption and the displayed size still must match).

A figure's output holds its PNG once, inside its ``text/html``; a record made before that
also kept it as ``image/png``, which is compared with the figure's ``_repr_png_``.
"""

from __future__ import annotations

import ast
import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalnb.core.jsondiff import as_json, differences, short
from evalnb.records.keyscan import without_image_data

# pandas' display options in a Jupyter kernel (not a terminal): what a cell's text/plain used.
KERNEL_PANDAS = ("display.max_columns", 20, "display.width", 80, "display.max_rows", 60)
MIMES = ("text/plain", "text/html", "image/png")


@dataclass
class NotebookCheck:
    lines: list[str] = field(default_factory=list)
    checked: int = 0
    not_checked: int = 0


def _formatter() -> Any:
    from IPython.core.formatters import DisplayFormatter
    formatter = DisplayFormatter()
    # A value that publishes itself in a kernel (a figure) is formatted here, not published.
    formatter.ipython_display_formatter.enabled = False
    return formatter


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def displayed(value: Any) -> dict[str, str]:
    """``value`` as a cell's output shows it: mime type -> text (images base64, as nbformat keeps them)."""
    import pandas as pd

    with pd.option_context(*KERNEL_PANDAS):
        data, _ = _formatter().format(value)
    return {mime: base64.b64encode(v).decode() if isinstance(v, bytes) else _text(v) for mime, v in data.items()}


def last_call(source: str) -> str | None:
    """The cell's last statement when it is a call ``NAME(run)``, ``NAME(cmp)`` or
    ``run.summary()``, as ``NAME``; else None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if not tree.body or not isinstance(tree.body[-1], ast.Expr) or not isinstance(tree.body[-1].value, ast.Call):
        return None
    return ast.unparse(tree.body[-1].value.func)


def injected_config(notebook: Mapping[str, Any]) -> Any:
    """The parameters papermill injected (the ``config = {...}`` cell), or None."""
    for cell in notebook.get("cells", []):
        if "injected-parameters" in (cell.get("metadata", {}).get("tags") or []):
            for node in ast.parse(_text(cell["source"])).body:
                if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "config" for t in node.targets):
                    return ast.literal_eval(node.value)
    return None


def check_notebook(path: Path, name: str, calls: Mapping[str, Callable[[], Any]], *,
                   config: Any = None, figures: bool = True, skip: frozenset[str] = frozenset()) -> NotebookCheck:
    """Every output of ``path`` that ``calls`` (cell's last call -> its recomputed value) can rebuild.

    ``config``: what the injected parameters must equal. ``skip``: calls run (for what they
    do, in cell order) but whose output is not compared (it names a scratch path)."""
    check = NotebookCheck()
    try:
        notebook = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as e:
        check.lines.append(f"{name}: not a readable notebook ({e})")
        return check
    if config is not None:
        injected = injected_config(notebook)
        for where, recorded, expected in differences(as_json(injected), as_json(config))[:5]:
            check.lines.append(f"{name}: injected parameters: {where}: {short(recorded)}, config.json has {short(expected)}")
    for number, cell in enumerate(notebook.get("cells", []), start=1):
        if cell.get("cell_type") != "code":
            continue
        outputs = cell.get("outputs") or []
        for out in outputs:
            if out.get("output_type") == "error":
                check.lines.append(f"{name}: cell {number}: an error output ({out.get('ename')})")
        results = [o for o in outputs if o.get("output_type") in ("execute_result", "display_data")]
        call = last_call(_text(cell.get("source", "")))
        if call is None or call not in calls:
            check.not_checked += bool(results)
            continue
        try:
            value = calls[call]()
        except Exception as e:   # noqa: BLE001 - a value that cannot be rebuilt is a discrepancy, not a crash
            check.lines.append(f"{name}: cell {number} ({call}): cannot be rebuilt ({type(e).__name__}: {e})")
            continue
        if call in skip or not results:
            continue
        expected = displayed(value)
        for mime in MIMES:
            if mime not in results[-1].get("data", {}) or (mime == "image/png" and not figures):
                continue
            shown, wanted = _text(results[-1]["data"][mime]), expected.get(mime)
            if mime == "image/png":
                shown = shown.replace("\n", "")
            elif mime == "text/html" and not figures and wanted is not None:
                shown, wanted = without_image_data(shown), without_image_data(wanted)
            check.checked += 1
            if wanted != shown:
                check.lines.append(f"{name}: cell {number} ({call}): output {mime} differs from the value "
                                   "recomputed from the stores")
    return check
