"""The reference agent behind ``agentrt agent``: an agent CLI built from plugins.

It reads user turns in a dialect (awp-jsonl by default) on stdin, streams a
provider plugin's model (``openai`` by default), runs the tools that tool
plugins offer, writes the reply in the same dialect on stdout and keeps its
own resumable session history.  See docs/reference-agent.md.

Public names: :func:`main` (the process), :func:`serve` (the same on given
streams, for embedding), :func:`turn_identity`, the session-history
functions and the limits.
"""

from __future__ import annotations

from ._history import MAX_MESSAGES as MAX_MESSAGES
from ._history import MAX_SESSION_BYTES as MAX_SESSION_BYTES
from ._history import SessionState as SessionState
from ._history import append_session as append_session
from ._history import load_session as load_session
from ._history import prepare_state_dir as prepare_state_dir
from ._history import save_session as save_session
from ._io import MAX_INPUT_LINE_BYTES as MAX_INPUT_LINE_BYTES
from ._loop import MAX_ROUNDS as MAX_ROUNDS
from ._loop import MAX_TOOL_CALLS as MAX_TOOL_CALLS
from ._loop import turn_identity as turn_identity
from ._main import main as main
from ._serve import serve as serve
from ._settings import AgentArgs as AgentArgs
from ._settings import parse_args as parse_args

__all__ = [
    "main",
    "serve",
    "parse_args",
    "AgentArgs",
    "turn_identity",
    "SessionState",
    "load_session",
    "save_session",
    "append_session",
    "prepare_state_dir",
    "MAX_MESSAGES",
    "MAX_SESSION_BYTES",
    "MAX_INPUT_LINE_BYTES",
    "MAX_ROUNDS",
    "MAX_TOOL_CALLS",
]
