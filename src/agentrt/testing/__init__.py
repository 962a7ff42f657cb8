"""agentrt's public test kit: fixture agent processes and conformance suites.

Third-party dialect and sink authors run these suites against their own code,
in the spirit of ``trio.testing.check_two_way_stream``.
"""

from __future__ import annotations

from ._dialect_suite import check_dialect as check_dialect
from ._dialect_suite import normalize_events as normalize_events
from ._fixture_agent import FIXTURE_MODES as FIXTURE_MODES
from ._fixture_agent import fixture_agent_argv as fixture_agent_argv
from ._fixture_agent import fixture_agent_path as fixture_agent_path
from ._fixture_agent import write_fixture_agent as write_fixture_agent
from ._replay import ReplayRequest as ReplayRequest
from ._replay import ReplayResponse as ReplayResponse
from ._replay import ReplayServer as ReplayServer
from ._replay import serve_replay as serve_replay
from ._sink_suite import check_sink as check_sink
from ._sink_suite import sample_events as sample_events
from ._tape_agent import tape_agent_path as tape_agent_path
from ._tape_agent import write_tape_agent as write_tape_agent
