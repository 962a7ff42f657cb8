"""The stream-json codecs (Claude-Code-style), both sides of the wire.

Input is the awp-jsonl user line; output is a superset of awp-jsonl's.  The
host codec handles the traps of the real CLI (see docs/dialects.md):

* ``system/init`` is repeated at the start of every turn: each one gives a
  :class:`~agentrt.events.SessionStarted` (the conversation keeps the first and
  treats an identical repeat as a no-op);
* ``assistant`` arrives one line per content block, and with
  ``--include-partial-messages`` after the ``stream_event`` deltas of the same
  block: text already streamed is not emitted again (tracked per message id and
  block index; only a suffix the stream did not deliver is emitted);
* a tool call gives exactly one :class:`~agentrt.events.ToolUse`, with its full
  input, from the ``assistant`` line or from the streamed block (its
  ``input_json_delta`` pieces parsed at ``content_block_stop``), whichever
  comes first;
* ``result.subtype`` is ``"success"`` even when ``is_error`` is true: the turn
  fails on ``is_error`` (or an ``error*`` subtype) with the code taken from
  ``api_error_status`` (``api_error_<status>``), ``terminal_reason``, a
  code-shaped ``result``, the subtype (``cc_<subtype>``), else ``cc_error``;
* a raw ``message_stop`` is not a terminal here: ``result`` always follows.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentrt.dialect import Dialect

from ._agent import StreamJsonAgentCodec
from ._host import StreamJsonHostCodec, permission_response
from ._typed import StreamDelta

__all__ = [
    "COMPAT_ARGS",
    "PARTIAL_MESSAGES_ARG",
    "PERMISSION_PROMPT_ARGS",
    "StreamJsonDialect",
    "StreamJsonHostCodec",
    "StreamJsonAgentCodec",
    "permission_response",
    "StreamDelta",
]

#: Added to the CLI's argv before ``--model`` (the AWP launch contract).
COMPAT_ARGS = ("--output-format", "stream-json", "--input-format", "stream-json", "--print", "--verbose")
#: The CLI sends every tool permission question to its host as a ``can_use_tool``
#: control request (without it, Claude Code refuses the tools it would ask about).
PERMISSION_PROMPT_ARGS = ("--permission-prompt-tool", "stdio")
#: The CLI streams each delta as a ``stream_event`` line (without it a reply arrives whole).
PARTIAL_MESSAGES_ARG = "--include-partial-messages"


def _sets(prefix_args: Sequence[str], flag: str) -> bool:
    return any(arg == flag or arg.startswith(flag + "=") for arg in prefix_args)


class StreamJsonDialect(Dialect):
    """Claude-Code-style stream-json; ``partial_messages`` selects the agent codec's streaming."""

    name = "stream-json"
    compat_args: tuple[str, ...] = COMPAT_ARGS

    def __init__(self, *, partial_messages: bool = False) -> None:
        self.partial_messages = partial_messages

    def launch_args(self, prefix_args: Sequence[str], *, partial_messages: bool = True) -> tuple[str, ...]:
        """:data:`COMPAT_ARGS`, then what the Agent SDK passes for agentrt's features.

        ``--permission-prompt-tool stdio`` (agentrt's approval policy answers
        every tool permission request) and, with ``partial_messages``,
        ``--include-partial-messages`` (live deltas); each only when the user's
        ``prefix_args`` do not already set it.
        """
        args = list(COMPAT_ARGS)
        if not _sets(prefix_args, PERMISSION_PROMPT_ARGS[0]):
            args += PERMISSION_PROMPT_ARGS
        if partial_messages and not _sets(prefix_args, PARTIAL_MESSAGES_ARG):
            args.append(PARTIAL_MESSAGES_ARG)
        return tuple(args)

    def host_codec(self) -> StreamJsonHostCodec:
        """A fresh host codec."""
        return StreamJsonHostCodec()

    def agent_codec(self) -> StreamJsonAgentCodec:
        """A fresh agent codec."""
        return StreamJsonAgentCodec(partial=self.partial_messages)
