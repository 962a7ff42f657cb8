"""agentrt's public test kit: fixture agent processes and conformance suites.

Third-party dialect, provider, tool and sink authors run these suites against their own code,
in the spirit of ``trio.testing.check_two_way_stream``.  Submodules: :mod:`.pytest_plugin` (scratch
home directories for a suite), :mod:`.fake_apis` (loopback fake model APIs for real agent CLIs) and
:mod:`.real_peers` (finding the pinned real CLIs and running them against those fakes).
"""

from __future__ import annotations

from ._dialect_suite import check_dialect as check_dialect
from ._dialect_suite import normalize_events as normalize_events
from ._fixture_agent import FIXTURE_MODES as FIXTURE_MODES
from ._fixture_agent import fixture_agent_argv as fixture_agent_argv
from ._fixture_agent import fixture_agent_path as fixture_agent_path
from ._fixture_agent import write_fixture_agent as write_fixture_agent
from ._pids import PidWatch as PidWatch
from ._provider_suite import SCRIPTED_REPLIES as SCRIPTED_REPLIES
from ._provider_suite import ScriptedReply as ScriptedReply
from ._provider_suite import check_provider as check_provider
from ._scripted_http import ReplayRequest as ReplayRequest
from ._scripted_http import ReplayResponse as ReplayResponse
from ._scripted_http import ReplayServer as ReplayServer
from ._scripted_http import serve_replay as serve_replay
from ._sink_suite import check_sink as check_sink
from ._sink_suite import sample_events as sample_events
from ._tape_agent import tape_agent_path as tape_agent_path
from ._tape_agent import write_tape_agent as write_tape_agent
from ._tool_suite import HOSTILE_STRINGS as HOSTILE_STRINGS
from ._tool_suite import TRAVERSAL_PATHS as TRAVERSAL_PATHS
from ._tool_suite import check_tool as check_tool
