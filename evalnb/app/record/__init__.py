"""Commands on finished records: compare and render (:mod:`.compare`), verify and pack."""
