"""The ``evalnb`` command line: :mod:`.main` parses the arguments and dispatches to one module
per command family: :mod:`.run` (run, status; the run's kernel in :mod:`.kernels`),
:mod:`.compare` (compare, render), :mod:`.demo` (demo, init; the project files in
:mod:`.project`), :mod:`.inspection` (estimate, probe-window, show). Every notebook a command
executes goes through :mod:`.notebooks`.

Exit status: 0 complete; 2 something resumable remains; 1 a configuration or data error,
or a stage that failed.
"""

EXIT_OK, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2
