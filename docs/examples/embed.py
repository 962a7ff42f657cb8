"""Embedding agentrt in a trio program: one conversation, two turns, events as they stream.

Run it from the checkout, after the README's install, with the example agent CLI beside this file:

    .venv/bin/python docs/examples/embed.py
"""

from __future__ import annotations

from pathlib import Path

import trio

from agentrt import LaunchSpec, open_conversation
from agentrt.events import TextDelta, TurnCompleted, TurnFailed

AGENT = str(Path(__file__).resolve().parent / "echo_agent.py")


async def main() -> None:
    # from_env validates the launch exactly as the AWP_AGENT_CLI_* variables would be;
    # keyword values override the (here empty) environment.
    launch = LaunchSpec.from_env({}, executable=AGENT, model="echo-1")
    async with open_conversation(launch) as conv:
        for prompt in ("hello", "and again"):
            async for event in conv.send(prompt):
                if isinstance(event, TextDelta):
                    print(event.text, end="", flush=True)
                elif isinstance(event, TurnCompleted):
                    print(f"\n[done: {event.usage.output_tokens if event.usage else '?'} tokens]")
                elif isinstance(event, TurnFailed):
                    print(f"\n[failed: {event.code}]")
        print(f"session {conv.session_id}")
    # Leaving the block stopped the agent process and reaped it.


if __name__ == "__main__":
    trio.run(main)
