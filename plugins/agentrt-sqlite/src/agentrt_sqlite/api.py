"""The public API of agentrt-sqlite (everything else in this package is private).

Import from here to record conversations or read threads and bots without
going through the plugin registry::

    from agentrt_sqlite.api import SqliteSink, SqliteStore

``read_events(database)`` gives the recorded events back (the transcripts
replayed through their dialects' decoders).  ``read_records(path, kinds=...)``
reads one transcript's raw records ``(kind, ms, offset, payload)``; its file under the
database's ``transcripts/`` directory is ``transcript_name(conversation_id)``.
"""

from __future__ import annotations

from ._reading import read_events as read_events
from ._recorder import ConversationInfo as ConversationInfo
from ._sink import SqliteSink as SqliteSink
from ._sink import make_sink as make_sink
from ._store import SqliteStore as SqliteStore
from ._store import ThreadSummary as ThreadSummary
from ._transcript import read_records as read_records
from ._transcript import transcript_name as transcript_name

__all__ = [
    "ConversationInfo", "SqliteSink", "SqliteStore", "ThreadSummary", "make_sink", "read_events", "read_records",
    "transcript_name",
]
