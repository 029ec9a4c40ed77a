"""What a reader of a finished run or comparison sees: the report's sections (:mod:`.report`),
the standard errors and pairwise sections (:mod:`.statistics`), the one HTML exporter
(:mod:`.render`), a record's paper copy (:mod:`.paper`), the LaTeX, Markdown and CSV exports
(:mod:`.exports`) and the notebook outputs verify recomputes (:mod:`.notebook_outputs`).

The top of the library: imports any package below it; the public names in ``evalnb`` and
the command line import it.
"""
