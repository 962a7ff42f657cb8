"""``agentrt run`` hands its trio run one typed, frozen options object (no loose positional parameters)."""

from __future__ import annotations

import inspect
import re

import attrs
import pytest

from agentrt._cli_run import RunOptions, _run


def test_the_run_takes_one_options_object() -> None:
    params = list(inspect.signature(_run).parameters.values())
    assert [(p.name, p.annotation) for p in params] == [("opts", "RunOptions")]


def test_every_option_is_typed_and_none_is_any() -> None:
    # The annotations are strings (postponed evaluation); mypy strict checks they name real types.
    fields = attrs.fields(RunOptions)
    assert len(fields) >= 10
    for field in fields:
        assert isinstance(field.type, str) and field.type, field.name
        assert not re.search(r"\bAny\b", field.type), f"{field.name}: {field.type}"


def test_options_are_frozen_and_a_thread_comes_with_its_store() -> None:
    assert attrs.has(RunOptions) and RunOptions.__setattr__ is not object.__setattr__
    base = {
        "launch": object(), "dialect": object(), "plugins": object(), "env": {}, "prompt": "hi",
        "sink": object(), "policy": object(), "conversation_id": "c",
    }
    with pytest.raises(ValueError, match="thread needs its store"):
        RunOptions(**base, thread="t")  # type: ignore[arg-type]
    opts = RunOptions(**base)  # type: ignore[arg-type]
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        opts.prompt = "changed"  # type: ignore[misc]
