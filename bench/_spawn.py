"""Benchmark helper: spawn a contender, wait for it, report its wall time and process-tree rusage.

``python -S _spawn.py OUT.json ARGV...``: the contender inherits this
process's stdin, stdout and stderr.  It exists because a child's ``ru_maxrss``
includes the memory of the process it was spawned from (the kernel keeps the
high-water mark of the address space that ``exec`` replaces): spawned from the
bench, which holds the corpus, every contender would report the bench's size.
This helper is small, so the peak it passes on is below any contender's own.
"""

import json
import os
import sys
import time


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, os.environ)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - start
    with open(out, "w") as f:
        json.dump(
            {
                "wall": wall,
                "cpu": usage.ru_utime + usage.ru_stime,
                "sys": usage.ru_stime,
                "minflt": usage.ru_minflt,
                "maxrss_kib": usage.ru_maxrss,
            },
            f,
        )
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
