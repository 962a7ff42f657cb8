"""``agentrt agent``: the reference agent CLI (implementation in :mod:`agentrt.agent`).

click does not parse the arguments: the AWP launch contract fixes how they
are read and requires an unknown one to be answered with a protocol line
(``unsupported_argument:<arg>``), not a usage message, so they are passed
through untouched.
"""

from __future__ import annotations

import sys

import click

_HELP = """Run the reference agent: JSON Lines turns on stdin, replies on stdout.

\b
Arguments (the AWP launch contract):
  --model M        model id (else AGENTRT_MODEL)
  --resume ID      continue the session ID (its history is in AGENTRT_STATE_DIR)
  --dialect NAME   wire dialect (default awp-jsonl)
  --include-partial-messages   stream-json: print each delta as it comes
  --mcp-config P, --input-format F, --output-format F   accepted and ignored
  --print, --verbose, --permission-prompt-tool stdio    accepted and ignored

\b
Environment: AGENTRT_API_BASE_URL, AGENTRT_API_TOKEN, AGENTRT_MODEL,
AGENTRT_SYSTEM_PROMPT, AGENTRT_TIMEOUT_MS, AGENTRT_STATE_DIR,
AGENTRT_REMOTE_API_OPT_IN, AGENTRT_PROVIDER.  See docs/reference-agent.md.
"""


@click.command(
    help=_HELP,
    context_settings={
        "ignore_unknown_options": True,
        "allow_extra_args": True,
        "allow_interspersed_args": False,
    },
    add_help_option=True,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def agent(args: tuple[str, ...]) -> None:
    """Run the reference agent CLI."""
    import logging

    from .agent import main

    # Libraries log through the standard logging (stamina: "stamina.retry_scheduled" on
    # every retry); with nothing configured Python prints such records bare on stderr,
    # which is the user's screen when the agent runs directly.  The agent reports what
    # matters on its protocol instead.
    logging.getLogger().addHandler(logging.NullHandler())
    sys.exit(main(list(args)))
