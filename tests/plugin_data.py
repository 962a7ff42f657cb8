"""Where the monorepo's own tests find data kept with a plugin distribution (its captures and fixtures).

Each plugin's tests read only files inside their distribution; the integration suite under ``tests/``
reads them through this module, so a move is one edit here.
"""

from __future__ import annotations

from pathlib import Path

import agentrt_stream_json.fixture_agent as _stream_json_fixture

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"


def plugin_tests(distribution: str) -> Path:
    """``plugins/<distribution>/tests``."""
    return PLUGINS / distribution / "tests"


#: Claude Code's stream-json captures (recorded by the ``record.py`` beside them).
CLAUDE_CODE_CAPTURES = plugin_tests("agentrt-stream-json") / "captures" / "claude-code"
#: Claude Code message shapes the project wrote (no recording produces them).
CLAUDE_CODE_SHAPES = plugin_tests("agentrt-stream-json") / "fixtures" / "claude-code" / "message-shapes.jsonl"
#: Real ACP peers' JSON-RPC traffic (recorded by the ``record.py`` beside them).
ACP_CAPTURES = plugin_tests("agentrt-acp") / "captures" / "acp"
#: The ACP fixture agent on the real Python SDK, and the plain JSON-RPC ACP client.
ACP_AGENT = plugin_tests("agentrt-acp") / "fixtures" / "acp_agent.py"
ACP_FIXTURES = plugin_tests("agentrt-acp") / "fixtures"
#: FastAgent stdout the project wrote from the CLI contract.
FASTAGENT_STDOUT = plugin_tests("agentrt-fastagent") / "fixtures" / "fastagent"
#: OpenAI-compatible SSE captures (recorded by the ``record.py`` beside them).
OPENAI_SSE_CAPTURES = plugin_tests("agentrt-openai") / "captures" / "openai-sse"
#: The stream-json fixture agent (``agentrt_stream_json.fixture_agent``), run as a script.
STREAM_JSON_AGENT = Path(_stream_json_fixture.__file__)
