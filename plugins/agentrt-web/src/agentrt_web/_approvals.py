"""Tool approval in the browser: an approval card with Approve / Deny, answered by a POST.

The thread's policy (:mod:`agentrt.approval`) asks through :meth:`WebApprovals.asker`:
the question goes to the thread's pages over server-sent events
(``{"k": "approval", ...}``), and ``POST /api/threads/NAME/approvals/ID``
(CSRF-checked like every ``/api/`` route) answers it.  Whatever ends the
question (an answer, the policy's timeout, the turn's end) is published as
``approval_done`` so every page closes the card, with a note when nobody
answered.  The browser sees the tool's name and its whole input, secret-masked
and with every control or bidi character escaped, never the raw request.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import trio

from agentrt.approval import Answer, ApprovalPrompt
from agentrt.errors import AgentrtError

from ._hub import Hub, sse_frame

__all__ = ["WebApprovals"]

_DECISIONS: dict[str, Answer] = {"allow": "allow", "deny": "deny", "always": "always"}


class _Pending:
    def __init__(self, thread: str) -> None:
        self.thread = thread
        self.answered = trio.Event()
        self.answer: Answer = "deny"


class WebApprovals:
    """Open questions of every thread of this server."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._pending: dict[str, _Pending] = {}

    def asker(self, thread: str) -> Any:
        """The asker of thread ``thread``'s policy."""

        async def ask(prompt: ApprovalPrompt) -> Answer:
            qid = secrets.token_urlsafe(12)
            pending = self._pending[qid] = _Pending(thread)
            # The card's heading names the tool; its body is the whole input, escaped (never cut).
            self._publish(thread, {"k": "approval", "id": qid, "label": prompt.name or prompt.label,
                                   "summary": prompt.summary, "always": prompt.always, "timeout": prompt.timeout})
            note = "no answer in time"
            try:
                await pending.answered.wait()
                note = ""
                return pending.answer
            finally:
                del self._pending[qid]
                self._publish(thread, {"k": "approval_done", "id": qid,
                                       "decision": "deny" if note else pending.answer, "note": note})

        return ask

    def answer(self, thread: str, qid: str, decision: str) -> bool:
        """Answer an open question; ``False`` if it is not open (answered, expired, another thread's)."""
        answer = _DECISIONS.get(decision)
        if answer is None:
            raise AgentrtError("bad_request", "decision must be allow, deny or always")
        pending = self._pending.get(qid)
        if pending is None or pending.thread != thread or pending.answered.is_set():
            return False
        pending.answer = answer
        pending.answered.set()
        return True

    def note(self, thread: str, text: str) -> None:
        """A visible note on the thread's pages (why a tool was denied without an answer)."""
        self._publish(thread, {"k": "note", "text": text[:300]})

    def _publish(self, thread: str, message: dict[str, Any]) -> None:
        self.hub.publish(f"thread:{thread}", sse_frame({"t": time.time(), "m": [message]}))
