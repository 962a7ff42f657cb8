"""Every command's --help renders as plain text: no reStructuredText markup reaches the terminal."""

from __future__ import annotations

import re

import click

from agentrt import cli as cli_module

# ``literal``, :role:`x`, and `text`_ links are markup a terminal shows verbatim.
MARKUP = re.compile(r"``|:[a-z]+:`|`_\b")


def _walk(command: click.Command, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):
        # The lazy groups load their commands through list_commands/get_command.
        ctx = click.Context(command, info_name=path[-1])
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            found += _walk(sub, (*path, name))
    return found


def test_every_help_text_is_plain() -> None:
    cli_module._load_plugin_commands()
    commands = _walk(cli_module.cli, ("agentrt",))
    assert len(commands) > 20  # the core commands and the plugins' were all found
    marked = {}
    for path, command in commands:
        ctx = click.Context(command, info_name=" ".join(path))
        text = command.get_help(ctx)
        if MARKUP.search(text):
            marked[" ".join(path)] = [line for line in text.splitlines() if MARKUP.search(line)]
    assert not marked, marked
