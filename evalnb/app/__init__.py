"""The ``evalnb`` command line: :mod:`.main` dispatches the arguments :mod:`.parser` reads to one
package per command family: :mod:`.runs` (run; the run's kernel, the notebooks a command
executes, ``--limit``/``--items``), :mod:`.suite` (evalnb suite), :mod:`.inspection`
(estimate, prompt, probe-window, show, status, plan) and :mod:`.record` (compare, render,
verify, pack). Beside them: the terminal's output and live progress, the closing tables
(:mod:`.results`), the demo and init (:mod:`.demo`, :mod:`.project`) and the API page
generator (:mod:`.apidoc`).

The top layer: imports any package of the library (the public names in ``evalnb`` included);
nothing in the library imports it.

Exit status: 0 complete; 2 something resumable remains; 1 a configuration or data error,
or a stage that failed.
"""

EXIT_OK, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2
