"""``evalnb suite``: the command (:mod:`.command`), one contestant's child process
(:mod:`.child`), the suite file read and checked (:mod:`.config`), its estimate and its state
on disk (:mod:`.estimate`, :mod:`.state`).

Part of the command line (:mod:`evalnb.app`): may import the whole library; only the
command line's own modules import it.
"""
