"""Commands that look without running: estimate, probe-window and show (:mod:`.commands`,
:mod:`.estimate_view`), prompt, status and plan.

Part of the command line (:mod:`evalnb.app`): may import the whole library; only the
command line's own modules import it.
"""
