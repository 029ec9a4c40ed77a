"""Commands on finished records: compare and render (:mod:`.compare`), verify and pack.

Part of the command line (:mod:`evalnb.app`): may import the whole library; only the
command line's own modules import it.
"""
