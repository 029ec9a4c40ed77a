"""A stage that fails says its innermost cause in its one line, through exception groups
(it once said `judge stage failed: CellExecutionError:` with an empty cause, the KeyError inside a
TaskGroup's ExceptionGroup)."""

from __future__ import annotations

import traceback
from pathlib import Path

import nbformat
import pytest
from papermill.exceptions import PapermillExecutionError

from evalnb.app.runs.notebooks import execute_alone, failure_cause
from evalnb.records.tracebacks import innermost_cause


def raised(error: BaseException) -> BaseException:
    try:
        raise error
    except BaseException as e:   # noqa: BLE001 - the point is to hold it, with its traceback
        return e


def group_text(*errors: BaseException, nested: bool = False) -> str:
    """Python's own text of a TaskGroup's exception group holding ``errors``."""
    inner: BaseException = ExceptionGroup("unhandled errors in a TaskGroup", [raised(e) for e in errors])
    if nested:
        inner = ExceptionGroup("outer", [raised(ValueError("beside")), raised(inner)])
    return "".join(traceback.format_exception(raised(inner)))


def test_the_innermost_exception_of_a_group_is_found() -> None:
    assert innermost_cause(group_text(KeyError("status"))) == "KeyError: 'status'"
    assert innermost_cause(group_text(KeyError("status"), RuntimeError("b"))) == (
        "KeyError: 'status' (and 1 more in the exception group)")
    assert innermost_cause(group_text(KeyError("status"), nested=True)) == "KeyError: 'status'"
    plain = "".join(traceback.format_exception(raised(ValueError("x: y"))))
    assert innermost_cause(plain) is None   # no group: the error output's own line says it


def notebook_with(path: Path, outputs: list[dict]) -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("evalnb.judge(run)")
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    cell.metadata["papermill"] = {"exception": True, "status": "failed"}
    nb.cells = [cell]
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("outputs", [
    # IPython 9 prints a group on stderr and sends no error output
    [{"output_type": "stream", "name": "stderr", "text": group_text(KeyError("status"))}],
    # an error output whose traceback is the group's text (with the terminal's colours)
    [{"output_type": "error", "ename": "ExceptionGroup", "evalue": "unhandled errors in a TaskGroup (1 sub-exception)",
      "traceback": ["\x1b[0;31m" + line + "\x1b[0m" for line in group_text(KeyError("status")).splitlines()]}],
])
def test_a_failed_stage_line_names_the_cause_inside_the_group(tmp_path: Path, outputs: list[dict]) -> None:
    notebook = notebook_with(tmp_path / "02_judge.ipynb", outputs)
    error = PapermillExecutionError(0, 1, "", "CellExecutionError", "", [])
    assert failure_cause(notebook, error) == "KeyError: 'status'"


def test_a_plain_error_keeps_its_own_line(tmp_path: Path) -> None:
    notebook = notebook_with(tmp_path / "02_judge.ipynb", [
        {"output_type": "error", "ename": "ValueError", "evalue": "bad value", "traceback": ["ValueError: bad value"]}])
    assert failure_cause(notebook, PapermillExecutionError(0, 1, "", "ValueError", "bad value", [])) == "ValueError: bad value"


def test_a_task_group_failing_in_a_real_kernel(tmp_path: Path) -> None:
    """Through the stages' own path (a kernel of evalnb's, papermill, the record): what IPython
    really sends for a TaskGroup's group, read back as its innermost cause."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(
        "import asyncio\nfrom evalnb.execution.runner import run_blocking\n"
        "async def interpret():\n    raise KeyError('status')\n"
        "async def stage():\n    async with asyncio.TaskGroup() as group:\n        group.create_task(interpret())\n"
        "run_blocking(stage)")]
    nbformat.write(nb, tmp_path / "in.ipynb")
    with pytest.raises(PapermillExecutionError) as failed:
        execute_alone(tmp_path / "in.ipynb", tmp_path / "out.ipynb", {}, tmp_path)
    assert failure_cause(tmp_path / "out.ipynb", failed.value) == "KeyError: 'status'"
