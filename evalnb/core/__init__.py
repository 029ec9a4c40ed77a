"""The foundation every other package stands on: the record types (:mod:`.types`), the errors,
the resolved parameters (:mod:`.run_config`), redaction of secrets, and small text helpers
(tokens, replies, reasoning, data files, subsets, ``--set`` overrides, JSON diffs).

Imports nothing of evalnb outside this folder; anything may import it.
"""
