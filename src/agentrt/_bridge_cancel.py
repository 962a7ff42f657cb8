"""Which turn a bridge's cancel is for: a burst is one cancel, and a late one touches no later turn.

An ACP client may send ``session/cancel`` many times for one prompt (a
thousand in a burst).  Each once started its own cancel task; those still
pending when the prompt ended interrupted or stopped the hosted CLI during the
next prompt.  :class:`TurnCancels` numbers the turns as the bridge's reader
accepts them and lets exactly one cancel start per turn, only while that turn
is the one running.
"""

from __future__ import annotations

__all__ = ["TurnCancels"]


class TurnCancels:
    """Cancel bookkeeping of one bridge (the reader and the turn runner share it; no locks: one trio thread).

    An interrupt is for the latest accepted turn.  The first one for a running
    turn starts its one cancel (:meth:`request` returns the number); one for a
    turn not yet started marks it (:meth:`wanted` then skips it, or
    :meth:`started` starts the cancel at its first event); every later one for
    the same turn is dropped.
    """

    def __init__(self) -> None:
        self.accepted = 0  # the latest turn the reader accepted
        self.running: int | None = None  # the turn whose events are flowing
        self._asked = 0  # the latest turn a cancel was asked for
        self._begun = 0  # the latest turn whose cancel task was started

    def accept(self) -> int:
        """Number the next turn the reader queues."""
        self.accepted += 1
        return self.accepted

    def request(self) -> int | None:
        """Note a cancel for the latest accepted turn; its number when a cancel task should start now."""
        target = self.accepted
        if target == 0 or self._asked >= target:
            return None
        self._asked = target
        if self.running == target:
            self._begun = target
            return target
        return None

    def wanted(self, number: int) -> bool:
        """True when turn ``number`` was cancelled before it started (it is then not run)."""
        return self._asked >= number

    def started(self, number: int) -> bool:
        """Turn ``number``'s events flow: True once, when a cancel asked for meanwhile should start now."""
        self.running = number
        if self._asked >= number and self._begun < number:
            self._begun = number
            return True
        return False

    def is_running(self, number: int) -> bool:
        """True while turn ``number`` is the running one (a cancel task checks this before it acts)."""
        return self.running == number

    def ended(self, number: int) -> None:
        """Turn ``number`` has ended."""
        if self.running == number:
            self.running = None
