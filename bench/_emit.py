"""Benchmark child: wait for one input line, then write a file to stdout in big writes.

Stdlib only and started with ``-S``-free plain Python so it costs the parent nothing.
"""

import sys


def main() -> None:
    path = sys.argv[1]
    sys.stdin.buffer.readline()
    out = sys.stdout.buffer
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            out.write(block)
    out.flush()


if __name__ == "__main__":
    main()
