"""``evalnb suite``: the command (:mod:`.command`), one contestant's child process
(:mod:`.child`), the suite file read and checked (:mod:`.config`), its estimate and its state
on disk (:mod:`.estimate`, :mod:`.state`)."""
