"""The typed facade over pluggy.  The core never calls ``pm.hook`` directly.

Loading: plugins come from the ``agentrt`` entry-point group, the built-in
ones exactly like a third party's.  ``AGENTRT_LOAD_PLUGINS`` (comma-separated
entry-point names) loads only those; an empty value loads none.
``AGENTRT_DISABLE_PLUGINS`` (comma-separated) skips the named ones.  Entry
points are only read when a :class:`Plugins` is created with ``autoload=True``.
``AGENTRT_PLUGIN_MODULES`` (comma-separated importable module names) registers
extra plugin modules by import path, as ``pytest -p`` does: tests use it to give
a child process a plugin without installing a distribution.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import pluggy

from . import hookspecs
from .errors import AgentrtError

if TYPE_CHECKING:
    from .dialect import Dialect
    from .permissions import PermissionPolicy
    from .provider import ProviderFactory
    from .sinks import SinkFactory
    from .tools import ToolFactory

__all__ = ["Plugins", "PluginInfo", "get_plugins", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "agentrt"
F = TypeVar("F")


@attrs.frozen(kw_only=True)
class PluginInfo:
    """One loaded plugin and what it provides."""

    name: str
    distribution: str | None
    version: str | None
    dialects: tuple[str, ...]
    providers: tuple[str, ...]
    tools: tuple[str, ...]
    sinks: tuple[str, ...]
    hooks: tuple[str, ...]


def _split(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {p.strip() for p in value.split(",") if p.strip()}


class Plugins:
    """A plugin manager with typed accessors for every hook."""

    def __init__(self, *, autoload: bool = False, env: Mapping[str, str] | None = None) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self._dists: dict[str, tuple[str | None, str | None]] = {}
        if autoload:
            self.load_entry_points(os.environ if env is None else env)

    # -- loading -------------------------------------------------------
    def load_entry_points(self, env: Mapping[str, str]) -> None:
        """Load the ``agentrt`` entry points, honouring the two env controls."""
        from importlib.metadata import entry_points

        only = _split(env.get("AGENTRT_LOAD_PLUGINS"))
        disabled = _split(env.get("AGENTRT_DISABLE_PLUGINS")) or set()
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if only is not None and ep.name not in only:
                continue
            if ep.name in disabled or self.pm.has_plugin(ep.name):
                continue
            try:
                module = ep.load()
            except Exception as exc:  # a broken plugin must not break the CLI
                raise AgentrtError(
                    "plugin_load_failed", f"plugin {ep.name!r} failed to load: {type(exc).__name__}: {exc}"
                ) from exc
            self.pm.register(module, name=ep.name)
            dist = ep.dist
            self._dists[ep.name] = (dist.name if dist else None, dist.version if dist else None)
        for module_name in sorted(_split(env.get("AGENTRT_PLUGIN_MODULES")) or ()):
            if self.pm.has_plugin(module_name):
                continue
            import importlib

            try:
                module = importlib.import_module(module_name)
            except Exception as exc:
                raise AgentrtError(
                    "plugin_load_failed",
                    f"plugin module {module_name!r} failed to import: {type(exc).__name__}",
                ) from exc
            self.pm.register(module, name=module_name)

    def register(self, plugin: object, name: str | None = None) -> None:
        """Register a plugin object (a module or any object with hookimpls)."""
        self.pm.register(plugin, name=name)

    # -- typed hook calls ---------------------------------------------
    def _collect(self, hook: Any) -> dict[str, F]:
        found: dict[str, F] = {}

        def register(name: str, factory: F) -> None:
            if not isinstance(name, str) or not name:
                raise AgentrtError("invalid_plugin_registration", f"bad name {name!r}")
            found[name] = factory

        hook(register=register)
        return found

    def dialects(self) -> dict[str, Callable[[], Dialect]]:
        """Registered dialect factories by name."""
        return self._collect(self.pm.hook.agentrt_register_dialects)

    def dialect(self, name: str) -> Dialect:
        """The dialect called ``name``, or ``invalid_cli_protocol``."""
        factories = self.dialects()
        if name not in factories:
            known = ", ".join(sorted(factories)) or "none loaded"
            raise AgentrtError("invalid_cli_protocol", f"unknown protocol {name!r} (known: {known})")
        return factories[name]()

    def providers(self) -> dict[str, ProviderFactory]:
        """Registered provider factories by name."""
        return self._collect(self.pm.hook.agentrt_register_providers)

    def tools(self) -> dict[str, ToolFactory]:
        """Registered tool factories by name."""
        return self._collect(self.pm.hook.agentrt_register_tools)

    def sinks(self) -> dict[str, SinkFactory]:
        """Registered sink factories by name."""
        return self._collect(self.pm.hook.agentrt_register_sinks)

    def add_commands(self, cli: Any) -> None:
        """Let plugins add CLI subcommands."""
        self.pm.hook.agentrt_register_commands(cli=cli)

    def thread_store(self, env: Mapping[str, str]) -> Any:
        """The plugin-provided thread store, or ``None`` when no plugin offers one."""
        return self.pm.hook.agentrt_thread_store(env=env)

    def bot_store(self, env: Mapping[str, str]) -> Any:
        """The plugin-provided bot store, or ``None`` when no plugin offers one."""
        return self.pm.hook.agentrt_bot_store(env=env)

    def permission_policy(self) -> PermissionPolicy:
        """The first plugin-provided permission policy, else :func:`~agentrt.permissions.deny_all`."""
        from .permissions import deny_all

        policy: PermissionPolicy | None = self.pm.hook.agentrt_permission_policy()
        return policy if policy is not None else deny_all

    # -- introspection -------------------------------------------------
    def info(self) -> list[PluginInfo]:
        """What each loaded plugin provides (for ``agentrt plugins``)."""
        out: list[PluginInfo] = []
        for name, plugin in sorted(self.pm.list_name_plugin(), key=lambda np: np[0]):
            single = pluggy.PluginManager(hookspecs.PROJECT_NAME)
            single.add_hookspecs(hookspecs)
            single.register(plugin, name=name)

            def names(hook: Any) -> tuple[str, ...]:
                got: list[str] = []
                hook(register=lambda n, f: got.append(n))
                return tuple(sorted(got))

            hooks = tuple(sorted(impl.__name__ for impl in _hookimpl_names(single, name)))
            dist, version = self._dists.get(name, (None, None))
            out.append(
                PluginInfo(
                    name=name,
                    distribution=dist,
                    version=version,
                    dialects=names(single.hook.agentrt_register_dialects),
                    providers=names(single.hook.agentrt_register_providers),
                    tools=names(single.hook.agentrt_register_tools),
                    sinks=names(single.hook.agentrt_register_sinks),
                    hooks=hooks,
                )
            )
        return out


class _Named:
    def __init__(self, name: str) -> None:
        self.__name__ = name


def _hookimpl_names(pm: pluggy.PluginManager, name: str) -> Iterable[_Named]:
    plugin = pm.get_plugin(name)
    for caller in pm.get_hookcallers(plugin) or []:
        yield _Named(caller.name)


_DEFAULT: Plugins | None = None


def get_plugins() -> Plugins:
    """The process-wide plugin manager, loaded from entry points on first use."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Plugins(autoload=True)
    return _DEFAULT
