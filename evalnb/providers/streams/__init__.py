"""Streamed calls: what every streamed reply shares (:mod:`.base`: the first token, usage at
the end, a stream cut short) and one module per SDK's event stream (:mod:`.openai`,
:mod:`.anthropic`, :mod:`.gemini`).

Part of :mod:`evalnb.providers`; imports the provider base and :mod:`evalnb.core`.
"""
