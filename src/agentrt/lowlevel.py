"""Low-level building blocks for plugins that spawn their own children.

Most code should use :func:`agentrt.open_conversation` (or, inside agentrt,
``agentrt._process.open_process``), which adds the bounded stop, stderr
buffering and exit watching.  A plugin that runs commands itself (for example
the managed-task worker) uses :func:`open_owned_process` so its children get
the same guarantees as agentrt's own: no shell, own process group, exactly the
given environment, and on Linux death with their owner (``PR_SET_PDEATHSIG``),
even when the owner is SIGKILLed.
"""

from __future__ import annotations

from ._spawn import DEATH_SIGNAL_SUPPORTED, OwnedProcess, open_owned_process

__all__ = ["DEATH_SIGNAL_SUPPORTED", "OwnedProcess", "open_owned_process"]
