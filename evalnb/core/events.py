"""The run's events: signals one part of a process gives the others, knowing nothing of them."""

from __future__ import annotations

import threading

# Set once a stage has stored its first reply: from then on the process mostly waits on the
# network and imports nothing more (the SDK has made its first-use imports), so work deferred
# until then (imports ahead of a later need) costs the first request nothing and cannot race
# an import of the calls' own.
FIRST_REPLY = threading.Event()
