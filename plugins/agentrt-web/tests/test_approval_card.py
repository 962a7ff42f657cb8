"""The approval card's content: the tool's name, its whole input escaped, what "always" covers.

The thread's real policy asks through :class:`WebApprovals`; the frames it
publishes are read back as the page's ``EventSource`` would parse them.
"""

from __future__ import annotations

from typing import Any

import orjson
import trio

from agentrt.approval import ApprovalPolicy, Ruleset
from agentrt.permissions import PermissionRequest
from agentrt_web._approvals import WebApprovals


class _Frames:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.published = trio.Event()

    def publish(self, topic: str, frame: bytes) -> None:
        data = frame.split(b"data: ", 1)[1]
        self.messages += orjson.loads(data)["m"]
        self.published.set()


async def test_the_card_shows_the_whole_input_escaped_and_what_always_covers() -> None:
    hub = _Frames()
    approvals = WebApprovals(hub)  # type: ignore[arg-type]
    policy = ApprovalPolicy(Ruleset.build(default_mode="ask"), asker=approvals.asker("t"), ask_timeout=30)
    command = "cat README.md #" + "x" * 300 + "\u202e\x1b[2K; rm -rf ~/important"
    request = PermissionRequest(tool_name="Bash", input={"command": command, "description": "read"}, request_id="r")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(policy, request)
        with trio.fail_after(30):
            await hub.published.wait()
        [card] = hub.messages
        assert approvals.answer("t", card["id"], "deny")
    assert card["label"] == "Bash"
    assert card["summary"] == "cat README.md #" + "x" * 300 + "\\u202e\\x1b[2K; rm -rf ~/important\ndescription: read"
    assert card["always"] == "Bash with exactly this command"
