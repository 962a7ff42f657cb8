"""The typed facade over pluggy.  The core never calls ``pm.hook`` directly.

Loading: plugins come from the ``agentrt`` entry-point group, the built-in
ones exactly like a third party's.  ``AGENTRT_LOAD_PLUGINS`` (comma-separated
entry-point names) loads only those; an empty value loads none.
``AGENTRT_DISABLE_PLUGINS`` (comma-separated) skips the named ones.  Entry
points are only read when a :class:`Plugins` is created with ``autoload=True``.
``AGENTRT_PLUGIN_MODULES`` (comma-separated importable module names) registers
extra plugin modules by import path, as ``pytest -p`` does: tests use it to give
a child process a plugin without installing a distribution.

Every registration is checked: a ``@hookimpl`` that matches no hook is refused
when its plugin is registered (``unknown_hook``), and a name two plugins both
register is refused when the names are collected (``duplicate_registration``);
both errors name the plugins, since the user's fix is to remove or disable one.

Sinks are found by role (:meth:`Plugins.sink_for`).  When several loaded sinks
hold one, the user's choice decides: ``--sink`` (:meth:`Plugins.choose_sinks`),
else, for a registry created with ``autoload=True``, the config file's
``[sinks]`` table; without one the role is ``ambiguous_sink_role``.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs
import pluggy

from . import hookspecs
from .errors import AgentrtError

if TYPE_CHECKING:
    import click

    from .bots import BotStore
    from .dialect import Dialect
    from .permissions import PermissionPolicy
    from .provider import ProviderFactory
    from .sinks import SinkFactory, SinkRole
    from .threads import ThreadStore
    from .tools import ToolFactory

__all__ = ["Plugins", "PluginInfo", "Registration", "get_plugins", "ENTRY_POINT_GROUP"]

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
    sink_roles: Mapping[str, str] = attrs.field(factory=dict)
    """Each of ``sinks`` with its role (``terminal``, ``recorder``, ``other``)."""


@attrs.frozen
class Registration(Generic[F]):
    """One named factory a plugin registered, and which plugin did."""

    name: str
    factory: F
    plugin: str
    role: str = "other"


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
        #: Which sink holds a role, as the user chose (``--sink``); wins over the config file's ``[sinks]``.
        self._chosen: dict[str, str] = {}
        # The config file's [sinks] choices are read from this env (only for an autoloaded registry,
        # the one the commands use), once, when a role is first asked for.
        self._config_env: Mapping[str, str] | None = None
        self._configured: dict[str, str] | None = None
        if autoload:
            self._config_env = os.environ if env is None else env
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
            self.register(module, name=ep.name)
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
            self.register(module, name=module_name)

    def register(self, plugin: object, name: str | None = None) -> None:
        """Register a plugin object (a module or any object with hookimpls).

        Raises ``unknown_hook`` (and leaves the plugin out) when one of its
        ``@hookimpl`` functions matches no hook, a misspelling that would
        otherwise be ignored silently.
        """
        registered = self.pm.register(plugin, name=name)
        unknown = self._unknown_hooks()
        if unknown:
            self.pm.unregister(plugin)
            shown = registered or name or repr(plugin)
            raise AgentrtError("unknown_hook", f"plugin {shown!r} implements {_describe_unknown(unknown)}")

    def _unknown_hooks(self) -> list[str]:
        # What pluggy's check_pending() checks, but collected so the error can
        # name the plugin and suggest the hook that was meant.
        found: list[str] = []
        for hook_name, caller in vars(self.pm.hook).items():
            if hook_name.startswith("_") or caller.has_spec():
                continue
            if any(not impl.optionalhook for impl in caller.get_hookimpls()):
                found.append(hook_name)
        return sorted(found)

    # -- typed hook calls ---------------------------------------------
    def _registrations(self, hook: Any, kind: str, *, roles: bool = False) -> dict[str, Registration[Any]]:
        """Call each plugin's implementation of a ``register`` hook; refuse a name registered twice."""
        from .sinks import SINK_ROLES

        found: dict[str, Registration[Any]] = {}
        # In pluggy's call order (last registered first), one implementation at
        # a time, so that each registration is known to come from its plugin.
        for impl in reversed(hook.get_hookimpls()):
            if impl.hookwrapper or impl.wrapper:
                continue  # a wrapper registers nothing itself

            def register(name: str, factory: Any, *, role: str = "other", _plugin: str = impl.plugin_name) -> None:
                if not isinstance(name, str) or not name:
                    raise AgentrtError("invalid_plugin_registration", f"plugin {_plugin!r}: bad {kind} name {name!r}")
                if roles and role not in SINK_ROLES:
                    raise AgentrtError(
                        "invalid_plugin_registration",
                        f"plugin {_plugin!r}: sink {name!r} has role {role!r} (one of {', '.join(SINK_ROLES)})",
                    )
                if name in found:
                    first = found[name].plugin
                    raise AgentrtError(
                        "duplicate_registration",
                        f"{kind} {name!r} is registered by both plugin {first!r} and plugin {_plugin!r}; "
                        "disable one with AGENTRT_DISABLE_PLUGINS",
                    )
                found[name] = Registration(name, factory, _plugin, role)

            impl.function(**{arg: register for arg in impl.argnames})
        return found

    def _collect(self, hook: Any, kind: str) -> dict[str, Any]:
        return {name: reg.factory for name, reg in self._registrations(hook, kind).items()}

    def dialects(self) -> dict[str, Callable[[], Dialect]]:
        """Registered dialect factories by name."""
        return self._collect(self.pm.hook.agentrt_register_dialects, "dialect")

    def dialect(self, name: str) -> Dialect:
        """The dialect called ``name``, or ``invalid_cli_protocol``."""
        factories = self.dialects()
        if name not in factories:
            known = ", ".join(sorted(factories)) or "none loaded"
            raise AgentrtError("invalid_cli_protocol", f"unknown protocol {name!r} (known: {known})")
        return factories[name]()

    def providers(self) -> dict[str, ProviderFactory]:
        """Registered provider factories by name."""
        return self._collect(self.pm.hook.agentrt_register_providers, "provider")

    def tools(self) -> dict[str, ToolFactory]:
        """Registered tool factories by name."""
        return self._collect(self.pm.hook.agentrt_register_tools, "tool")

    def sinks(self) -> dict[str, SinkFactory]:
        """Registered sink factories by name."""
        return {name: reg.factory for name, reg in self.sink_registrations().items()}

    def sink_registrations(self) -> dict[str, Registration[SinkFactory]]:
        """Registered sinks by name, with their plugin and role."""
        return self._registrations(self.pm.hook.agentrt_register_sinks, "sink", roles=True)

    def choose_sinks(self, choices: Mapping[str, str]) -> None:
        """Make sink ``choices[role]`` the one :meth:`sink_for` gives for ``role`` (``--sink``).

        A choice made here wins over the config file's ``[sinks]`` table.
        """
        self._chosen.update(choices)

    def sink_choice(self, role: str) -> str | None:
        """The sink name chosen for ``role``: by :meth:`choose_sinks`, else by the config file, else ``None``."""
        if role in self._chosen:
            return self._chosen[role]
        if self._configured is None:
            self._configured = {}
            if self._config_env is not None:
                from ._config import load_config

                self._configured = dict(load_config(self._config_env).sinks)
        return self._configured.get(role)

    def sink_for(self, role: SinkRole) -> SinkFactory | None:
        """The factory of the sink holding ``role`` (``terminal``, ``recorder``), or ``None``.

        A sink chosen for the role (:meth:`sink_choice`) is given whatever else
        holds it; a chosen name that is not a loaded sink is ``unknown_sink``,
        one of another role ``sink_role_mismatch``.  Without a choice, several
        loaded holders raise ``ambiguous_sink_role``, naming each with its
        plugin and how to pick: the commands cannot guess which one is meant.
        """
        registrations = self.sink_registrations()
        chosen = self.sink_choice(role)
        if chosen is not None:
            reg = registrations.get(chosen)
            if reg is None:
                known = ", ".join(sorted(n for n, r in registrations.items() if r.role == role)) or "none loaded"
                raise AgentrtError(
                    "unknown_sink", f"the {role} sink chosen, {chosen!r}, is not a loaded sink ({role} sinks: {known})"
                )
            if reg.role != role:
                raise AgentrtError(
                    "sink_role_mismatch",
                    f"the {role} sink chosen, {chosen!r} (plugin {reg.plugin!r}), has the role {reg.role!r}",
                )
            return reg.factory
        holders = [reg for reg in registrations.values() if reg.role == role]
        if len(holders) > 1:
            named = " and ".join(f"{reg.name!r} (plugin {reg.plugin!r})" for reg in sorted(holders, key=_by_name))
            raise AgentrtError(
                "ambiguous_sink_role",
                f"sinks {named} both have the role {role!r}; pick one with --sink NAME or, in the config "
                f'file, [sinks] {role} = "NAME" (or disable a plugin with AGENTRT_DISABLE_PLUGINS)',
            )
        return holders[0].factory if holders else None

    def conflicts(self) -> list[str]:
        """Every name two or more loaded plugins register, as ``duplicate_registration`` would say it.

        For ``agentrt plugins``: unlike the accessors, which stop at the first
        clash, this lists them all.
        """
        owners: dict[tuple[str, str], list[str]] = {}
        for info in self.info():
            for kind in ("dialect", "provider", "tool", "sink"):
                for name in getattr(info, f"{kind}s"):
                    owners.setdefault((kind, name), []).append(info.name)
        return [
            f"{kind} {name!r} is registered by plugins {' and '.join(repr(p) for p in plugins)}; "
            f"disable one with AGENTRT_DISABLE_PLUGINS={plugins[-1]}"
            for (kind, name), plugins in sorted(owners.items())
            if len(plugins) > 1
        ]

    def add_commands(self, cli: click.Group) -> None:
        """Let plugins add CLI subcommands."""
        self.pm.hook.agentrt_register_commands(cli=cli)

    def thread_store(self, env: Mapping[str, str]) -> ThreadStore | None:
        """The plugin-provided thread store, or ``None`` when no plugin offers one."""
        store: ThreadStore | None = self.pm.hook.agentrt_thread_store(env=env)
        return store

    def bot_store(self, env: Mapping[str, str]) -> BotStore | None:
        """The plugin-provided bot store, or ``None`` when no plugin offers one."""
        store: BotStore | None = self.pm.hook.agentrt_bot_store(env=env)
        return store

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

            roles: dict[str, str] = {}

            def names(hook: Any, into: dict[str, str] | None = None) -> tuple[str, ...]:
                got: list[str] = []

                def register(n: str, f: Any, *, role: str = "other") -> None:
                    got.append(n)
                    if into is not None:
                        into[n] = role

                hook(register=register)
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
                    sinks=names(single.hook.agentrt_register_sinks, roles),
                    hooks=hooks,
                    sink_roles=dict(sorted(roles.items())),
                )
            )
        return out


def _by_name(reg: Registration[Any]) -> str:
    return reg.name


def _describe_unknown(hooks: list[str]) -> str:
    from . import hookspecs as specs

    known = [n for n in vars(specs) if n.startswith(f"{hookspecs.PROJECT_NAME}_")]
    parts = []
    for name in hooks:
        close = difflib.get_close_matches(name, known, n=1)
        parts.append(f"{name!r}, which is not a hook" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return "; ".join(parts)


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
