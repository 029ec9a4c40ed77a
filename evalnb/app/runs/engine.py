"""The papermill engine a stage notebook is executed with: papermill's own nbclient engine,
with two changes that keep the executed record honest.

- **Written whole.** papermill saves the executed notebook after every cell by opening the
  file for writing and writing it out: a process killed during that write leaves a truncated
  record. Here every save goes through :func:`evalnb.records.stores.write_text` (a temporary
  file in the same folder, then a rename), so the record on disk is always some cell's whole
  state. papermill itself is given no output path (its own writes go nowhere); the record's
  path is handed to the engine as ``record``.
- **Not finished is not complete.** When execution stops early (Ctrl-C, the kernel died),
  papermill still stamps the notebook with an end time and marks every cell that never ran
  ``completed``. Here a stopped execution keeps the cell it was running ``running`` and the
  cells after it ``pending``, with no end time, so the record says how far it got
  (:func:`evalnb.records.completion.reached`).

The run's connected client (``kc``) is given to the notebook client, which then neither
starts one nor waits for it (see :func:`evalnb.app.runs.kernels.execute_stage`).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

ENGINE = "evalnb-run-kernel"


@functools.cache   # once per process
def register_engine() -> None:
    import nbformat
    from papermill.clientwrap import PapermillNotebookClient
    from papermill.engines import NBClientEngine, NotebookExecutionManager, papermill_engines
    from papermill.log import logger

    from evalnb.records.stores import write_text

    class WholeRecord(NotebookExecutionManager):   # type: ignore[misc]
        """papermill's execution state, saved whole, and finished only when it finished."""

        finished = False

        def save(self, **kwargs: Any) -> None:
            if kwargs.get("nb"):
                self.nb = kwargs["nb"]
            if self.output_path:
                write_text(Path(self.output_path), nbformat.writes(self.nb))
            self.last_save_time = self.now()

        def notebook_complete(self, **kwargs: Any) -> None:
            if self.finished:
                super().notebook_complete(**kwargs)
                return
            self.cleanup_pbar()   # stopped early: no end time, unrun cells stay pending
            self.save()

    class RunKernelEngine(NBClientEngine):   # type: ignore[misc]
        @classmethod
        def execute_notebook(cls, nb: Any, kernel_name: str, output_path: Any = None, progress_bar: Any = False,
                             log_output: bool = False, autosave_cell_every: int = 30, record: str | None = None,
                             **kwargs: Any) -> Any:
            manager = WholeRecord(nb, output_path=record, progress_bar=False, log_output=log_output,
                                  autosave_cell_every=autosave_cell_every)
            manager.nb.metadata.papermill["output_path"] = record
            manager.notebook_start()
            try:
                cls.execute_managed_notebook(manager, kernel_name, log_output=log_output, **kwargs)
                manager.finished = True
            finally:
                manager.notebook_complete()
            return manager.nb

        @classmethod
        def execute_managed_notebook(cls, nb_man: Any, kernel_name: str, log_output: bool = False,
                                     stdout_file: Any = None, stderr_file: Any = None,
                                     start_timeout: int = 60, execution_timeout: float | None = None,
                                     **kwargs: Any) -> Any:
            kc = kwargs.pop("kc")
            kwargs.pop("input_path", None)
            client = PapermillNotebookClient(
                nb_man, timeout=execution_timeout, startup_timeout=start_timeout,
                kernel_name=kernel_name, log=logger, log_output=log_output, stdout_file=stdout_file,
                stderr_file=stderr_file, **kwargs)
            client.kc = kc   # nbclient connects a client only when it has none
            return client.execute()

    papermill_engines.register(ENGINE, RunKernelEngine)
