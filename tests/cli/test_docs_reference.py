"""Meta-tests: every core command and option is in the CLI reference; every hook is documented."""

from __future__ import annotations

import inspect
from pathlib import Path

import click
import pytest

from agentrt import hookspecs
from agentrt.cli import _CORE, cli

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", sorted(_CORE))
def test_core_command_and_options_are_documented(name: str) -> None:
    text = (DOCS / "cli.md").read_text()
    assert f"## `agentrt {name}" in text
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    section = text.split(f"## `agentrt {name}", 1)[1].split("\n## ", 1)[0]
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            for opt in param.opts:
                if opt.startswith("--") and opt != "--help":
                    assert opt in section, f"{opt} of `agentrt {name}` is not in docs/cli.md"


def test_every_hook_has_a_docstring_and_the_agentrt_prefix() -> None:
    hooks = [f for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("agentrt_")]
    assert len(hooks) >= 8
    for hook in hooks:
        assert hook.__doc__ and len(hook.__doc__.strip()) > 20, hook.__name__
        assert hasattr(hook, "agentrt_spec"), hook.__name__
