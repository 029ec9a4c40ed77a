"""``evalnb run``: the command (:mod:`.command`), the run's kernel (:mod:`.kernels`), the one
path a command executes a notebook by (:mod:`.notebooks`) and ``--limit``/``--items``
(:mod:`.subset`).

Part of the command line (:mod:`evalnb.app`): may import the whole library; only the
command line's own modules import it.
"""
