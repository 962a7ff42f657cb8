"""``agentrt bridge``: speak one dialect on stdio while hosting a CLI in another."""

from __future__ import annotations

import os
import sys

import click


@click.command(
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h", "--help"]}
)
@click.argument("argv", nargs=-1, type=click.UNPROCESSED)
def bridge(argv: tuple[str, ...]) -> None:
    """Be an agent CLI (--to DIALECT, default awp-jsonl) hosting the CLI the launch contract names.

    \b
    agentrt bridge --to awp-jsonl [-a NAME] [--model M] [--resume ID] [-- AWP_AGENT_CLI_EXECUTABLE=/path ...]

    Arguments after -- of the form AWP_AGENT_*=VALUE (or AGENTRT_CONFIG=PATH)
    override the launch contract's variables for the hosted CLI; -a NAME
    hosts a named agent of the config file.  Startup errors print one
    "result" line with a stable code and exit 1; with --to acp the
    client's first request is answered with a JSON-RPC error instead (stdout
    carries JSON-RPC only).
    """
    import orjson
    import trio

    from ._bridge import parse_bridge_args, serve_bridge
    from ._exit_reason import mask_text
    from ._plugins import get_plugins
    from ._startup_error import dialect_in_argv, report_startup_error
    from .agent._io import open_stdio
    from .errors import AgentrtError

    async def main() -> int:
        source, sink = open_stdio()
        try:
            args = parse_bridge_args(argv)
            return await serve_bridge(args, dict(os.environ), get_plugins(), source, sink)
        except AgentrtError as exc:
            line: dict[str, object] = {
                "type": "result", "subtype": "startup_error", "is_error": True, "result": exc.code,
            }
            if exc.detail:
                # The host shows why (a path, a setting), not only the code; masked like any agent's words.
                line["errors"] = [mask_text(exc.detail)]
            await report_startup_error(
                dialect_in_argv(argv, "--to"), source, sink, exc.code, exc.detail, line=orjson.dumps(line) + b"\n"
            )
            if exc.detail:
                print(f"agentrt bridge: {exc.code}: {exc.detail}", file=sys.stderr)
            return 1
        finally:
            await source.aclose()
            await sink.aclose()

    sys.exit(trio.run(main))
