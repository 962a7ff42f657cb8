"""Benchmark child: a stream-json CLI stand-in that both agentrt and the Claude Agent SDK can host.

``_fake_cli.py SESSION RUSAGE_OUT``: answers every ``control_request`` (the
SDK's ``initialize``) with a success ``control_response``; on the first
``user`` line writes SESSION to stdout in 1 MiB writes; then reads stdin to
EOF (both hosts close it when the turn is over) and writes its own CPU seconds
and peak RSS to RUSAGE_OUT, so the bench can take the child's share out of the
host's process-tree figures.  Standard library only, so it starts fast.
"""

import json
import resource
import sys


def main() -> None:
    session, rusage_out = sys.argv[1], sys.argv[2]
    out = sys.stdout.buffer
    sent = False
    for line in sys.stdin.buffer:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        kind = msg.get("type")
        if kind == "control_request":
            reply = {"type": "control_response",
                     "response": {"subtype": "success", "request_id": msg.get("request_id"), "response": {}}}
            out.write(json.dumps(reply).encode() + b"\n")
            out.flush()
        elif kind == "user" and not sent:
            sent = True
            with open(session, "rb") as f:
                while True:
                    block = f.read(1 << 20)
                    if not block:
                        break
                    out.write(block)
            out.flush()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(rusage_out, "w") as f:
        json.dump(
            {
                "cpu": usage.ru_utime + usage.ru_stime,
                "sys": usage.ru_stime,
                "minflt": usage.ru_minflt,
                "maxrss_kib": usage.ru_maxrss,
            },
            f,
        )


if __name__ == "__main__":
    main()
