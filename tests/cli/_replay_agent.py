"""Fixture agent (stream-json): after the first input line, the bytes of a file, then stdin to its end.

``_replay_agent.py FILE``: FILE holds the agent's whole output for the turn
(its ``result`` line included), written as it is.
"""

import sys


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        data = f.read()
    sys.stdin.readline()
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    sys.stdin.read()  # until the host closes stdin


if __name__ == "__main__":
    main()
