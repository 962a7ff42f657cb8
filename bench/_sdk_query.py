"""Benchmark contender: the Claude Agent SDK's ``query()`` over a custom CLI path, printing the reply.

``_sdk_query.py CLI``: runs one ``query()`` with ``cli_path=CLI`` and writes
the reply text to stdout as ``agentrt run`` does on a pipe: each streamed text
delta, and the text blocks of an assistant message whose text was not streamed.
"""

import asyncio
import sys


async def main(cli: str) -> None:
    from claude_agent_sdk import AssistantMessage, ClaudeAgentOptions, TextBlock, query
    from claude_agent_sdk.types import StreamEvent

    options = ClaudeAgentOptions(cli_path=cli, include_partial_messages=True, max_buffer_size=8 * 1024 * 1024)
    write = sys.stdout.write
    streamed: set[str] = set()
    current = None
    async for message in query(prompt="go", options=options):
        if type(message) is StreamEvent:
            event = message.event
            kind = event.get("type")
            if kind == "content_block_delta":
                delta = event.get("delta") or {}
                if delta.get("type") == "text_delta":
                    streamed.add(current)
                    write(delta.get("text", ""))
            elif kind == "message_start":
                current = (event.get("message") or {}).get("id")
        elif type(message) is AssistantMessage and message.message_id not in streamed:
            for block in message.content:
                if type(block) is TextBlock:
                    write(block.text)
    write("\n")
    sys.stdout.flush()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
