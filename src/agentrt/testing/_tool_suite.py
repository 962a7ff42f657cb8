"""``check_tool``: the conformance suite a tool passes, against bad and hostile arguments.

The model writes a tool's arguments, so they are untrusted input: the wrong
types, missing fields, not an object at all, megabytes long, full of control
characters, paths that climb out of where the tool works.  A tool answers each
with a result or with :class:`~agentrt.AgentrtError` (the model sees
``{"error": code}``), promptly, and never with another exception::

    from agentrt.testing import check_tool

    async def test_my_tool_conforms():
        await check_tool(my_factory, env={"MY_TOOL_ROOT": str(root)}, valid=[{"name": "a.txt"}],
                         paths=["name"])

A plain async function, deterministic (fixed inputs, derived from the tool's
own JSON schema), raising :class:`AssertionError` that names the tool, the
arguments (shortened) and what failed.
"""

from __future__ import annotations

import copy
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import trio

from ..errors import AgentrtError
from ..tools import Tool, ToolContext

__all__ = ["check_tool", "TRAVERSAL_PATHS", "HOSTILE_STRINGS"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CODE = re.compile(r"^[a-z][a-z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_MAX_DETAIL = 2000
_HUGE = 2 * 1024 * 1024

#: Path values that leave any directory a tool confines itself to.
TRAVERSAL_PATHS: tuple[str, ...] = (
    "../../../../../../etc/passwd", "/etc/passwd", "a/../../b", "..", "~/.ssh/id_rsa", "..\\..\\windows",
    "a/\x00/b", "%2e%2e/%2e%2e/etc/passwd", "/proc/self/environ",
)
#: Strings of a valid type that a tool must survive (a result or AgentrtError).
HOSTILE_STRINGS: tuple[str, ...] = (
    "", " ", "a\x00b", "\x1b[31mred\x1b[0m\x1b]0;title\x07", "line\r\nbreak", "\u202egnp.exe", "\ud800",
    "é" * 1000, "$(rm -rf /); `id` | cat", "{{7*7}} ${HOME} %s %n", "A" * _HUGE,
)
_JSON_VALUES: tuple[Any, ...] = (None, True, 7, 2.5, "text", [1], {"k": "v"})
_NOT_OBJECTS: tuple[Any, ...] = (None, [], ["x"], "text", 7, True)
_CONTEXT = ToolContext(session_id="check-tool-session", turn_identity="0" * 64, tool_call_id="call_check_1")
ToolMaker = Callable[[Mapping[str, str]], "Tool | None"]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _allows(declared: Any, value: Any) -> bool:
    kinds = {declared} if isinstance(declared, str) else set(declared)
    kind = _json_type(value)
    return kind in kinds or (kind == "integer" and "number" in kinds)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else f"{text[:60]}...<{len(text)} chars>...{text[-20:]}"


class _Checker:
    def __init__(self, tool: Tool, hang_after: float) -> None:
        self.tool = tool
        self.hang_after = hang_after
        self.label = f"check_tool({getattr(tool, 'name', '?')})"

    def fail(self, what: str) -> AssertionError:
        return AssertionError(f"{self.label}: {what}")

    async def call(self, arguments: Any, *, why: str, must_refuse: bool) -> None:
        """Call the tool; a result must be JSON, an error AgentrtError; ``must_refuse``: an error it must be."""
        where = f"{why}, arguments {_short(arguments)}"
        with trio.move_on_after(self.hang_after) as scope:
            try:
                result = await self.tool.call(arguments, _CONTEXT)
            except AgentrtError as exc:
                self.check_error(exc, where)
                return
            except Exception as exc:
                raise self.fail(
                    f"{where}: raised a raw {type(exc).__name__} ({_short(str(exc))}); report bad input as "
                    "AgentrtError(code, detail)"
                ) from exc
        if scope.cancelled_caught:
            raise self.fail(f"{where}: did not return within {self.hang_after:g} s")
        if must_refuse:
            raise self.fail(f"{where}: returned {_short(result)} instead of refusing with AgentrtError")
        try:
            json.dumps(result, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise self.fail(f"{where}: the result {_short(result)} is not JSON ({exc})") from None

    def check_error(self, exc: AgentrtError, where: str) -> None:
        if not isinstance(exc.code, str) or not _CODE.match(exc.code):
            raise self.fail(f"{where}: error code {exc.code!r} is not a stable snake_case code")
        detail = exc.detail if isinstance(exc.detail, str) else ""
        if len(detail) > _MAX_DETAIL:
            raise self.fail(f"{where}: the detail of {exc.code} is {len(detail)} characters (at most {_MAX_DETAIL})")
        if _CONTROL.search(detail):
            raise self.fail(f"{where}: the detail of {exc.code} has raw control characters: {_short(detail)}")


def _check_attributes(tool: Tool, label: str) -> None:
    name = getattr(tool, "name", None)
    assert isinstance(name, str) and _NAME.match(name), f"{label}: name {name!r} must match [A-Za-z0-9_-]{{1,64}}"
    description = getattr(tool, "description", None)
    assert isinstance(description, str) and description.strip(), f"{label}: description must be a non-empty str"
    params = getattr(tool, "parameters", None)
    assert isinstance(params, Mapping), f"{label}: parameters must be a JSON schema mapping, not {params!r}"
    try:
        json.dumps(params, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"{label}: parameters are not JSON ({exc})") from None
    assert params.get("type") == "object", f"{label}: parameters must have \"type\": \"object\""
    props = params.get("properties", {})
    assert isinstance(props, Mapping), f"{label}: parameters.properties must be an object"
    required = params.get("required", [])
    assert isinstance(required, list) and all(r in props for r in required), (
        f"{label}: parameters.required {required!r} must list names of parameters.properties"
    )
    assert inspect.iscoroutinefunction(tool.call), f"{label}: call must be an async method"


def _check_factory(factory: ToolMaker, env: Mapping[str, str], label: str) -> Tool:
    variants: list[tuple[str, dict[str, str]]] = [("an empty env", {})]
    for key in env:
        for bad in ("", "\x00", "../../../../etc", "x" * 100_000, "\x1b[31m"):
            variants.append((f"{key}={_short(bad)}", {**env, key: bad}))
    for what, variant in variants:
        try:
            made = factory(variant)
        except AgentrtError:
            continue  # a startup error with a code: what a bad configuration should give
        except Exception as exc:
            raise AssertionError(
                f"{label}: the factory raised a raw {type(exc).__name__} for {what}; return None (not configured)"
                " or raise AgentrtError"
            ) from exc
        assert made is None or callable(getattr(made, "call", None)), f"{label}: the factory returned {made!r}"
    tool = factory(dict(env))
    assert tool is not None, f"{label}: the factory returned None for env {sorted(env)}: the tool is not configured"
    return tool


async def check_tool(
    tool: Tool | ToolMaker,
    *,
    valid: Sequence[Mapping[str, Any]] = (),
    env: Mapping[str, str] | None = None,
    paths: Sequence[str] = (),
    hang_after: float = 30.0,
) -> None:
    """Run the tool conformance suite; raises ``AssertionError`` naming the tool, the arguments and what failed.

    ``tool`` is a tool or its registered factory, called as ``factory(env)``
    (and also with an empty env and with each of ``env``'s values replaced by
    a bad one: it must return a tool, ``None`` or raise ``AgentrtError``).
    ``valid`` are arguments the tool accepts (the first is the base the bad and
    hostile arguments are made from; without any, the base is made from the
    schema, its defaults, examples and enums, and may be answered with a
    result or ``AgentrtError``); ``paths`` names the
    string parameters that are paths, which must refuse a path leaving the
    tool's directory.  ``hang_after`` bounds each call; only a hang reaches it.

    It checks that: ``name`` suits every model API, ``description`` is text,
    ``parameters`` is a JSON object schema and ``call`` is async; each valid
    call returns JSON (no NaN); arguments that are not an object, lack a
    ``required`` field, give a field a type its schema excludes, or carry an
    unknown field where ``additionalProperties`` is false are refused with
    ``AgentrtError``; hostile strings (control characters, a lone surrogate,
    2 MiB, shell and template syntax), extreme numbers, long and deep values
    in valid places give JSON or ``AgentrtError``; a ``paths`` parameter
    refuses :data:`TRAVERSAL_PATHS`; every error has a snake_case code and a
    one-line detail of at most 2000 characters; a call cancelled at once lets
    the cancellation through.
    """
    if callable(getattr(tool, "call", None)):
        made = cast(Tool, tool)  # a Tool has call(); a ToolMaker is a plain callable
    else:
        label = f"check_tool({getattr(tool, '__name__', type(tool).__name__)})"
        made = _check_factory(cast(ToolMaker, tool), dict(env or {}), label)
    checker = _Checker(made, hang_after)
    _check_attributes(made, checker.label)
    params = made.parameters
    props: Mapping[str, Any] = params.get("properties", {})
    for name in paths:
        assert name in props, f"{checker.label}: paths names {name!r}, which is not a parameter"
    for arguments in valid:
        await checker.call(copy.deepcopy(dict(arguments)), why="valid arguments", must_refuse=False)
    base = dict(valid[0]) if valid else _from_schema(params)
    if not valid:
        await checker.call(copy.deepcopy(base), why="arguments made from the schema", must_refuse=False)
    for value in _NOT_OBJECTS:
        await checker.call(value, why="arguments that are not an object", must_refuse=True)
    for name in params.get("required", []):
        missing = {k: v for k, v in base.items() if k != name}
        await checker.call(missing, why=f"required {name!r} missing", must_refuse=True)
    for name, schema in props.items():
        declared = schema.get("type") if isinstance(schema, Mapping) else None
        if declared is None:
            continue  # no declared type (anyOf, $ref...): no wrong type to give
        for wrong in _JSON_VALUES:
            if not _allows(declared, wrong):
                await checker.call({**base, name: wrong}, why=f"{name!r} of the wrong type", must_refuse=True)
        for hostile, why in _hostile_values(declared, base.get(name)):
            await checker.call({**base, name: hostile}, why=f"{name!r} {why}", must_refuse=False)
    if params.get("additionalProperties") is False:
        await checker.call({**base, "check_tool_unknown": 1}, why="an unknown field", must_refuse=True)
    for name in paths:
        for path in TRAVERSAL_PATHS:
            await checker.call({**base, name: path}, why=f"{name!r} leaving the tool's directory", must_refuse=True)
    await _check_cancel(checker, base)


_SAMPLES: dict[str, Any] = {"string": "example", "integer": 1, "number": 1.5, "boolean": True, "array": [],
                            "object": {}, "null": None}


def _from_schema(params: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments with each required property set from its schema: default, first example or enum, else a sample."""
    props: Mapping[str, Any] = params.get("properties", {})
    out: dict[str, Any] = {}
    for name in params.get("required", []):
        schema = props.get(name)
        schema = schema if isinstance(schema, Mapping) else {}
        examples, enum, declared = schema.get("examples"), schema.get("enum"), schema.get("type")
        if "default" in schema:
            out[name] = copy.deepcopy(schema["default"])
        elif isinstance(examples, list) and examples:
            out[name] = copy.deepcopy(examples[0])
        elif isinstance(enum, list) and enum:
            out[name] = copy.deepcopy(enum[0])
        else:
            kind = declared if isinstance(declared, str) else (declared or ["string"])[0]
            value = _SAMPLES.get(kind, "example")
            if kind in ("integer", "number") and isinstance(schema.get("minimum"), (int, float)):
                value = max(value, schema["minimum"])
            out[name] = value
    return out


def _hostile_values(declared: Any, example: Any) -> list[tuple[Any, str]]:
    kinds = {declared} if isinstance(declared, str) else set(declared)
    out: list[tuple[Any, str]] = []
    if "string" in kinds:
        out += [(s, "hostile string") for s in HOSTILE_STRINGS]
    if kinds & {"number", "integer"}:
        out += [(v, "extreme number") for v in (0, -1, 2**63, -(2**200), 10**400)]
    if "number" in kinds:
        out += [(v, "non-finite number") for v in (float("nan"), float("inf"), float("-inf"), 1e308)]
    if "array" in kinds:
        item = example[0] if isinstance(example, list) and example else "x"
        out += [([], "empty"), ([item] * 100_000, "of 100000 items"), (_deep([], 500), "nested 500 deep")]
    if "object" in kinds:
        out += [({}, "empty"), (_deep({}, 500), "nested 500 deep"),
                ({f"k{i}": i for i in range(50_000)}, "of 50000 keys")]
    return out


def _deep(leaf: Any, depth: int) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value] if isinstance(leaf, list) else {"a": value}
    return value


async def _check_cancel(checker: _Checker, base: Mapping[str, Any]) -> None:
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await checker.tool.call(dict(base), _CONTEXT)
        except AgentrtError as exc:
            raise checker.fail(f"a cancelled call raised {exc.code}, not the cancellation") from None
        except Exception as exc:
            raise checker.fail(f"a cancelled call raised a raw {type(exc).__name__}") from exc
