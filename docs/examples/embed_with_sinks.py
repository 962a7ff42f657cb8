"""Embedding agentrt with sinks: the database records the turn, the terminal UI shows it.

    .venv/bin/python docs/examples/embed_with_sinks.py [DATABASE_FILE]

Sinks come from the plugin registry by name, exactly as a third-party sink would;
the database file defaults to a temporary one here (normally it is
``$XDG_DATA_HOME/agentrt/agentrt.db``).
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

import trio

from agentrt import LaunchSpec, get_plugins, open_conversation

AGENT = str(Path(__file__).resolve().parent / "echo_agent.py")


async def main(db_path: Path) -> None:
    plugins = get_plugins()
    sinks = plugins.sinks()
    # Every event, the conversation and its turns go to this file; "thread" names the
    # conversation so `agentrt threads show demo` finds it and a later run can resume it.
    database = sinks["sqlite"]({"url": f"sqlite://{db_path}", "thread": "demo"})
    # The terminal UI: rich on a terminal, plain text (no escape codes) on a pipe.
    terminal = sinks["tui"]({})

    launch = LaunchSpec.from_env({}, executable=AGENT, model="echo-1")
    async with open_conversation(launch, plugins=plugins, sinks=[database]) as conv:
        await conv.attach(terminal)  # sinks can also join a running conversation
        result = await conv.ask("hello from an embedding program")
        session = conv.session_id
    # Leaving the block stopped the agent and flushed and closed both sinks.
    print(f"[{result.type}, session {session}]")

    def turns() -> list[tuple[str, str, str]]:
        db = sqlite3.connect(db_path)
        try:
            return db.execute("SELECT prompt, reply, outcome FROM turns").fetchall()
        finally:
            db.close()

    for prompt, reply, outcome in await trio.to_thread.run_sync(turns):
        print(f"stored: {prompt!r} -> {reply!r} ({outcome})")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        trio.run(main, Path(sys.argv[1]).resolve())
    else:
        with tempfile.TemporaryDirectory() as tmp:
            trio.run(main, Path(tmp) / "agentrt.db")
