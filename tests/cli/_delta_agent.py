"""Fixture agent (stream-json): after the first input line, numbered text deltas, then one result.

``_delta_agent.py COUNT PIDFILE``: COUNT deltas (0: without end, until stopped);
the agent's pid is written to PIDFILE first, so a test can check it was reaped.
"""

import json
import os
import sys


def main() -> None:
    count, pidfile = int(sys.argv[1]), sys.argv[2]
    with open(pidfile, "w") as f:
        f.write(str(os.getpid()))
    sys.stdin.readline()
    out = sys.stdout
    i = 0
    while count == 0 or i < count:
        event = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": f"<{i:07d}>"}}
        out.write(json.dumps({"type": "stream_event", "event": event, "session_id": "s-1"}) + "\n")
        i += 1
    out.write(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "",
                          "session_id": "s-1"}) + "\n")
    out.flush()
    sys.stdin.read()  # until the host closes stdin


if __name__ == "__main__":
    main()
