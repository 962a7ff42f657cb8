"""The model server child: llama.cpp's own OpenAI-compatible server through ``xllamacpp``.

Run as a script by the interpreter that has the ``[model]`` extra (it imports
only ``xllamacpp`` and the standard library, so that interpreter needs no
agentrt)::

    python _serve.py --model PATH --port N --alias NAME [--threads N]

It serves ``127.0.0.1:N`` until SIGTERM or SIGINT, then exits at once (the
server's threads are not joined: the process ends with them).

The packaged model is a *base* model: it continues documents.  The chat
template below renders a conversation as a question-and-answer document
(the system prompt first, then ``Q: …`` / ``A: …``), decoding is greedy and
a reply stops at the end of its line, so the model's most likely
continuation is one short answer.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

#: Jinja chat template: the conversation as a Q/A document the base model continues.
QA_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' -%}{{ message.content }}\n\n"
    "{%- elif message.role == 'user' -%}Q: {{ message.content | trim }}\n"
    "{%- else -%}A: {{ message.content | trim }}\n\n{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}A:{%- endif -%}"
)
#: Where an answer ends: its line, or the next question the model would invent.
STOP = ["\n", "Q:"]
#: Context window; it also bounds a conversation's history.
N_CTX = 2048
#: Tokens per reply at most: an answer is a line.
N_PREDICT = 96


def _args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="agentrt-local-model-server")
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", default="local-model")
    # One thread by default: on a busy machine two llama.cpp threads spin on each
    # other's barrier and a reply took minutes; a 270M model answers fast on one.
    parser.add_argument("--threads", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    """Serve until SIGTERM/SIGINT; 2 on bad arguments, 1 when the model does not load."""
    args = _args(argv)
    # Blocked before the server starts its threads (they inherit the mask), so the
    # signal reaches sigwait below; an ignored signal is discarded even while
    # blocked, so whatever the parent left ignored (nohup, a background job) is reset.
    stops = {signal.SIGTERM, signal.SIGINT}
    for signum in stops:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    import xllamacpp  # the [model] extra: untyped, optional (pyproject.toml tells mypy)

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = args.alias
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_ctx = N_CTX
    params.n_predict = N_PREDICT
    params.n_parallel = 1
    params.chat_template = QA_TEMPLATE
    params.antiprompt = STOP
    params.sampling.temp = 0.0  # greedy: the most likely answer, the same every run
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.verbosity = 0
    try:
        # Kept referenced: the server stops when the object is collected.
        server = xllamacpp.Server(params)
    except Exception as exc:  # the binding raises plain exceptions for a model that does not load
        print(f"the model did not load: {exc}", file=sys.stderr, flush=True)
        return 1
    _wait(server, stops)
    os._exit(0)


def _wait(server: object, stops: set[signal.Signals]) -> None:
    """Hold ``server`` (it stops when collected) until one of ``stops`` arrives."""
    signal.sigwait(stops)
    sys.stdout.flush()
    sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
