"""agentrt's public test kit: fixture agent processes and conformance suites.

Third-party dialect and sink authors run these suites against their own code,
in the spirit of ``trio.testing.check_two_way_stream``.
"""

from __future__ import annotations
