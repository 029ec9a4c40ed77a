"""What a run leaves on disk, and the one way each part is read and written: the call stores
(:mod:`.stores`: JSONL written whole, the latest line per key), the manifest, the fingerprint
and its resume check, the run lock, the key scan, each record's shape check
(:mod:`.validation`), when calls were made (:mod:`.call_times`), the run's prompts and the
innermost cause of a failed cell.

Imports :mod:`evalnb.core`, :mod:`evalnb.stats` and :mod:`evalnb.views`; :mod:`evalnb.providers`
and every layer above may import it.
"""
