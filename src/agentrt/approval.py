"""Tool approval, public: allow / deny / ask rules as one :data:`~agentrt.permissions.PermissionPolicy`.

The rule engine (:class:`Ruleset`, :class:`ApprovalPolicy`), the terminal asker
of ``run`` and ``chat``, and the command-line options ``run``, ``chat`` and
``web`` share.  See ``docs/approval.md``.
"""

from __future__ import annotations

from ._approval import (
    ASK_TIMEOUT,
    Answer,
    ApprovalDecision,
    ApprovalPolicy,
    ApprovalPrompt,
    Rule,
    Ruleset,
    Verdict,
    input_summary,
    mask_secrets,
    parse_rule,
    tool_label,
)
from ._ask_terminal import AskCancelled, TerminalAsker
from ._cli_approval import approval_options, build_approval_policy, close_recorder, store_recorder

__all__ = [
    "ASK_TIMEOUT",
    "Answer",
    "ApprovalDecision",
    "ApprovalPolicy",
    "ApprovalPrompt",
    "AskCancelled",
    "Rule",
    "Ruleset",
    "TerminalAsker",
    "Verdict",
    "approval_options",
    "build_approval_policy",
    "close_recorder",
    "input_summary",
    "mask_secrets",
    "parse_rule",
    "store_recorder",
    "tool_label",
]
