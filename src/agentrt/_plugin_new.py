"""Writing a new plugin package from the templates shipped in ``agentrt/_plugin_templates``.

A template is a tree of ``*.tmpl`` files (``common/`` for every kind, then the
kind's own), filled with :class:`string.Template`; a path part ``__package__``
becomes the package's name and ``__ident__`` the plugin's identifier.  The
package written installs with pip, registers one capability named after the
plugin, and has a test that runs the kind's conformance suite on it.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Collection
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template

import attrs

from .errors import AgentrtError

__all__ = ["KINDS", "PluginNames", "plugin_names", "write_plugin"]

_NAME = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")
_MAX_NAME = 48


@attrs.frozen
class _Kind:
    module: str
    check: str
    dependencies: tuple[str, ...]
    description: str
    usage: str


KINDS: dict[str, _Kind] = {
    "dialect": _Kind(
        "_codec.py", "check_dialect", ("orjson>=3.10",), "an agentrt dialect",
        "Drive a CLI that speaks it: `agentrt run --protocol $name ...` (or `AWP_AGENT_CLI_PROTOCOL=$name`).",
    ),
    "provider": _Kind(
        "_provider.py", "check_provider", ("httpx>=0.27", "orjson>=3.10"), "an agentrt model provider",
        "The reference agent uses it with `AGENTRT_PROVIDER=$name` and `${ENV}_URL` (default "
        "`http://127.0.0.1:11434`, an Ollama-style `/api/chat`).",
    ),
    "tool": _Kind(
        "_tool.py", "check_tool", (), "an agentrt tool",
        "The reference agent offers it to its model when `${ENV}_DIR` names a directory of notes.",
    ),
    "sink": _Kind(
        "_sink.py", "check_sink", ("orjson>=3.10",), "an agentrt sink",
        "Add it to a run: `${ENV}_FILE=/abs/events.jsonl agentrt run --sink $name ...`.",
    ),
}


@attrs.frozen(kw_only=True)
class PluginNames:
    """Every name a plugin called ``name`` gets."""

    name: str  #: the plugin (entry point) name, and the dialect, provider or sink name
    dist: str  #: the distribution, ``agentrt-<name>``
    package: str  #: the import package, ``agentrt_<name>``
    ident: str  #: ``name`` with ``_`` for ``-``: the tool name and the prefix of the plugin's codes
    cls: str  #: the class-name prefix, ``name`` in CamelCase
    env: str  #: the prefix of the plugin's environment variables, ``ident`` upper-cased

    def capability(self, kind: str) -> str:
        """The name the plugin registers its ``kind`` under."""
        return self.ident if kind == "tool" else self.name


def plugin_names(name: str) -> PluginNames:
    """The names for a plugin ``name``; ``invalid_plugin_name`` unless it is lower-case words joined by - or _."""
    if not isinstance(name, str) or len(name) > _MAX_NAME or not _NAME.match(name):
        raise AgentrtError(
            "invalid_plugin_name",
            f"{name!r} is not a plugin name: lower-case letters and digits in words joined by '-' or '_', "
            f"starting with a letter, at most {_MAX_NAME} characters (e.g. acme-notes)",
        )
    words = name.replace("_", "-")
    dist = words if words.startswith("agentrt-") else f"agentrt-{words}"
    ident = name.replace("-", "_")
    return PluginNames(
        name=name, dist=dist, package=dist.replace("-", "_"), ident=ident,
        cls="".join(part.capitalize() for part in words.split("-")), env=ident.upper(),
    )


def _templates(kind: str) -> list[tuple[str, Traversable]]:
    """``(relative path, template)`` for ``kind``: the common files, then the kind's own."""
    root = files("agentrt").joinpath("_plugin_templates")
    out: list[tuple[str, Traversable]] = []
    for top in ("common", kind):
        stack: list[tuple[str, Traversable]] = [("", root.joinpath(top))]
        while stack:
            prefix, folder = stack.pop()
            for item in sorted(folder.iterdir(), key=lambda t: t.name):
                if item.is_dir():
                    stack.append((f"{prefix}{item.name}/", item))
                elif item.name.endswith(".tmpl"):
                    out.append((prefix + item.name.removesuffix(".tmpl"), item))
    return out


def write_plugin(kind: str, name: str, directory: Path | None = None, *, taken: Collection[str] = ()) -> list[Path]:
    """Write the package of a ``kind`` plugin called ``name`` into ``directory``; the files written.

    ``directory`` defaults to ``./agentrt-<name>``; it must not exist or be
    empty.  ``taken`` are names already registered (a plugin or a capability of
    this kind), refused with ``plugin_name_taken``.  Errors:
    ``unknown_plugin_kind``, ``invalid_plugin_name``, ``plugin_name_taken``
    (also when a package of the name is importable), ``plugin_dir_not_empty``,
    ``plugin_write_failed``.
    """
    spec = KINDS.get(kind.lower() if isinstance(kind, str) else kind)
    if spec is None:
        raise AgentrtError("unknown_plugin_kind", f"{kind!r} is not a plugin kind (one of {', '.join(KINDS)})")
    kind = kind.lower()
    names = plugin_names(name)
    for candidate in sorted({names.name, names.capability(kind)}):
        if candidate in taken:
            raise AgentrtError(
                "plugin_name_taken",
                f"{candidate!r} is already registered by an installed plugin (agentrt plugins): pick another name",
            )
    if importlib.util.find_spec(names.package) is not None:
        raise AgentrtError(
            "plugin_name_taken", f"a package {names.package!r} is already installed: pick another name"
        )
    target = Path(directory) if directory is not None else Path.cwd() / names.dist
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise AgentrtError("plugin_dir_not_empty", f"{str(target)!r} exists and is not an empty directory")
    values = attrs.asdict(names) | {
        "ENV": names.env,
        "kind": kind,
        "check": spec.check,
        "module": spec.module,
        "test": f"test_{names.ident}.py",
        "capability": names.capability(kind),
        "description": f"{spec.description.capitalize()}, {names.capability(kind)}",
        "dependencies": "".join(f'    "{dep}",\n' for dep in spec.dependencies),
    }
    values["usage"] = Template(spec.usage).substitute(values)
    written: list[Path] = []
    for relative, template in _templates(kind):
        path = target / relative.replace("__package__", names.package).replace("__ident__", names.ident)
        text = Template(template.read_text(encoding="utf-8")).substitute(values)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise AgentrtError("plugin_write_failed", f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        written.append(path)
    return written
