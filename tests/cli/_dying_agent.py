"""Fixture agent (stream-json): reads the first input line, says why on stderr, exits 7.

Its stderr holds more lines than are shown, a secret taken from its own env
(``FIXTURE_API_KEY``), and a bearer token, so a test can check the tail is
bounded and masked.
"""

import os
import sys


def main() -> None:
    sys.stdin.readline()
    err = sys.stderr
    for i in range(20):
        err.write(f"fixture: starting step {i}\n")
    err.write(f"fixture: using key {os.environ.get('FIXTURE_API_KEY', '')}\n")
    err.write("fixture: header Authorization: Bearer abcdefghijklmnop1234\n")
    err.write("\n")
    err.write("fixture: fatal: the model refused the credentials\n")
    err.flush()
    sys.exit(7)


if __name__ == "__main__":
    main()
