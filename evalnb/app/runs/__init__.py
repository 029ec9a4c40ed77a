"""``evalnb run``: the command (:mod:`.command`), the run's kernel (:mod:`.kernels`), the one
path a command executes a notebook by (:mod:`.notebooks`) and ``--limit``/``--items``
(:mod:`.subset`)."""
