"""The plugin registry's checks and the typed seams: duplicates, misspelt hooks, sinks by role.

Plugins here are tiny in-test objects (a class with ``@hookimpl`` methods) or,
for the CLI test, a plugin module loaded by a real ``agentrt run`` through
``AGENTRT_PLUGIN_MODULES``.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentrt import AgentrtError, Plugins, hookimpl, hookspecs
from agentrt.testing import write_fixture_agent

AGENTRT = str(Path(sys.executable).with_name("agentrt"))
HOOK_OF_KIND = {
    "dialect": "agentrt_register_dialects",
    "provider": "agentrt_register_providers",
    "tool": "agentrt_register_tools",
    "sink": "agentrt_register_sinks",
}


def _registers(hook: str, name: str, **kw: Any) -> object:
    """A plugin object whose ``hook`` registers one factory called ``name``."""

    def factory(*args: Any) -> None:
        return None

    def impl(self: object, register: Any) -> None:
        register(name, factory, **kw)

    impl.__name__ = hook
    return type("P", (), {hook: hookimpl(impl), "factory": staticmethod(factory)})()


@pytest.mark.parametrize("kind", sorted(HOOK_OF_KIND))
def test_a_name_registered_twice_is_refused_naming_both_plugins(kind: str) -> None:
    plugins = Plugins()
    plugins.register(_registers(HOOK_OF_KIND[kind], "same"), name="first-plugin")
    plugins.register(_registers(HOOK_OF_KIND[kind], "other"), name="innocent")
    plugins.register(_registers(HOOK_OF_KIND[kind], "same"), name="second-plugin")
    collect = {"dialect": plugins.dialects, "provider": plugins.providers, "tool": plugins.tools,
               "sink": plugins.sinks}[kind]
    with pytest.raises(AgentrtError) as info:
        collect()
    assert info.value.code == "duplicate_registration"
    assert f"{kind} 'same'" in info.value.detail
    assert "'first-plugin'" in info.value.detail and "'second-plugin'" in info.value.detail
    assert "innocent" not in info.value.detail


def test_distinct_names_from_several_plugins_are_all_collected() -> None:
    plugins = Plugins()
    plugins.register(_registers("agentrt_register_dialects", "a"), name="pa")
    plugins.register(_registers("agentrt_register_dialects", "b"), name="pb")
    assert sorted(plugins.dialects()) == ["a", "b"]


def test_a_misspelt_hookimpl_is_refused_naming_the_plugin_and_the_hook() -> None:
    plugins = Plugins()

    class Misspelt:
        @hookimpl
        def agentrt_register_dialect(self, register: Any) -> None:  # the hook ends in "s"
            register("never", object)

    with pytest.raises(AgentrtError) as info:
        plugins.register(Misspelt(), name="typo-plugin")
    assert info.value.code == "unknown_hook"
    detail = info.value.detail
    assert "'typo-plugin'" in detail and "'agentrt_register_dialect'" in detail
    assert "did you mean 'agentrt_register_dialects'" in detail
    # The plugin is left out, and the registry stays usable.
    assert not plugins.pm.has_plugin("typo-plugin")
    plugins.register(_registers("agentrt_register_dialects", "ok"), name="fine")
    assert list(plugins.dialects()) == ["ok"]


def test_an_optional_hookimpl_of_an_unknown_hook_is_allowed() -> None:
    class Forward:
        @hookimpl(optionalhook=True)
        def agentrt_hook_of_a_later_version(self) -> None:
            """Implemented ahead of the spec: pluggy's optionalhook says that is fine."""

    plugins = Plugins()
    plugins.register(Forward(), name="forward")
    assert plugins.pm.has_plugin("forward")


def test_the_installed_plugins_register_no_name_twice_and_hold_the_two_roles() -> None:
    plugins = Plugins(autoload=True, env={})
    for collect in (plugins.dialects, plugins.providers, plugins.tools, plugins.sinks):
        collect()  # raises duplicate_registration on a clash
    regs = plugins.sink_registrations()
    assert {(r.name, r.plugin, r.role) for r in regs.values()} >= {("sqlite", "sqlite", "recorder"),
                                                                   ("tui", "tui", "terminal")}
    assert plugins.sink_for("recorder") is regs["sqlite"].factory
    assert plugins.sink_for("terminal") is regs["tui"].factory


def test_sinks_are_picked_by_role_not_by_name() -> None:
    plugins = Plugins()
    mine = _registers("agentrt_register_sinks", "my-db", role="recorder")
    plugins.register(mine, name="mine")
    plugins.register(_registers("agentrt_register_sinks", "sqlite"), name="impostor")  # the name, no role
    assert plugins.sink_for("recorder") is mine.factory  # type: ignore[attr-defined]
    assert plugins.sink_for("terminal") is None
    assert plugins.sink_registrations()["sqlite"].role == "other"


def test_two_sinks_in_one_role_and_an_unknown_role_are_refused() -> None:
    plugins = Plugins()
    plugins.register(_registers("agentrt_register_sinks", "db1", role="recorder"), name="p1")
    plugins.register(_registers("agentrt_register_sinks", "db2", role="recorder"), name="p2")
    with pytest.raises(AgentrtError) as info:
        plugins.sink_for("recorder")
    assert info.value.code == "ambiguous_sink_role"
    assert "'db1' (plugin 'p1')" in info.value.detail and "'db2' (plugin 'p2')" in info.value.detail
    bad = Plugins()
    bad.register(_registers("agentrt_register_sinks", "x", role="archivist"), name="p3")
    with pytest.raises(AgentrtError) as info:
        bad.sinks()
    assert info.value.code == "invalid_plugin_registration" and "'archivist'" in info.value.detail


def test_hookspecs_are_typed() -> None:
    def annotation(hook: str, param: str | None = None) -> str:
        sig = inspect.signature(getattr(hookspecs, hook))
        return str(sig.return_annotation if param is None else sig.parameters[param].annotation)

    assert annotation("agentrt_register_commands", "cli") == "click.Group"
    assert annotation("agentrt_thread_store", "env") == "Mapping[str, str]"
    assert annotation("agentrt_thread_store") == "ThreadStore | None"
    assert annotation("agentrt_bot_store", "env") == "Mapping[str, str]"
    assert annotation("agentrt_bot_store") == "BotStore | None"
    assert annotation("agentrt_register_sinks", "register") == "SinkRegister"


_RECORDER_PLUGIN = '''
import json
from agentrt import hookimpl
from agentrt.threads import ThreadRecord

PATH = {path!r}


class _Store:
    async def get_thread(self, name):
        return None

    async def save_thread(self, record):
        with open(PATH + ".threads", "a") as f:
            f.write(record.name + "\\n")


class _Recorder:
    name = "file-recorder"
    policy = "block"
    buffer_size = 16

    def __init__(self, options):
        self.thread = options.get("thread")

    async def handle(self, batch):
        with open(PATH, "a") as f:
            for event in batch.events:
                f.write(json.dumps({{"thread": self.thread, "type": type(event).__name__}}) + "\\n")

    async def aclose(self):
        pass


@hookimpl
def agentrt_register_sinks(register):
    register("file-recorder", _Recorder, role="recorder")


@hookimpl
def agentrt_thread_store(env):
    return _Store()
'''


def test_agentrt_run_records_through_whichever_sink_holds_the_recorder_role(tmp_path: Path) -> None:
    """A third-party recorder (not called "sqlite") gets a --thread run's events; sqlite is disabled."""
    log = tmp_path / "recorded.jsonl"
    (tmp_path / "file_recorder_plugin.py").write_text(_RECORDER_PLUGIN.format(path=str(log)))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(tmp_path),
        "AGENTRT_PLUGIN_MODULES": "file_recorder_plugin",
        "AGENTRT_DISABLE_PLUGINS": "sqlite",
        "AWP_AGENT_CLI_EXECUTABLE": write_fixture_agent(tmp_path, "normal"),
    }
    proc = subprocess.run([AGENTRT, "run", "--thread", "t1", "hi"], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert rows and all(r["thread"] == "t1" for r in rows)
    assert "TurnCompleted" in {r["type"] for r in rows}
    assert (tmp_path / "recorded.jsonl.threads").read_text() == "t1\n"

    # With sqlite enabled too, two sinks hold the role: a coded usage error, nothing guessed.
    env.pop("AGENTRT_DISABLE_PLUGINS")
    proc = subprocess.run([AGENTRT, "run", "--thread", "t2", "hi"], env=env, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2, proc.stderr
    assert "agentrt: error: ambiguous_sink_role:" in proc.stderr and "'file-recorder'" in proc.stderr
