"""The public API of agentrt-tui (everything else in this package is private).

Import from here to render a conversation in a terminal from your own program::

    from agentrt_tui.api import TuiSink
"""

from __future__ import annotations

from ._sink import TuiSink as TuiSink
from ._sink import make_sink as make_sink

__all__ = ["TuiSink", "make_sink"]
