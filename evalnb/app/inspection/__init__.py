"""Commands that look without running: estimate, probe-window and show (:mod:`.commands`,
:mod:`.estimate_view`), prompt, status and plan."""
