"""``agentrt agents``: list, show, add and remove the named agents of the config file.

Also :func:`resolve_for_cli`, the command-line face of
:func:`agentrt._resolve_agent.resolve_agent` that every command (``run``, ``chat``,
``web``, ``check``, ``bridge``) calls: an error prints
``agentrt: error: <code>: <message>`` and exits 2.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import click
import orjson

from ._config import AgentConfig, Config, load_config, parse_config
from ._launch import contains_remote_url
from ._preset_find import check_executable, fill_preset
from ._presets import PRESETS
from ._resolve_agent import ResolvedAgent, resolve_agent
from .errors import AgentrtError
from .masking import mask_args, mask_env, mask_text

__all__ = ["agents", "resolve_for_cli", "load_config_for_cli"]

#: What ``--local-model`` saves when no ``--endpoint`` is given: llama-cpp-python's server default.
LOCAL_MODEL_ENDPOINT = "http://127.0.0.1:8000/v1"


def _fail(code: str, detail: str) -> NoReturn:
    click.echo(f"agentrt: error: {code}: {detail}", err=True)
    sys.exit(2)


def load_config_for_cli(env: Mapping[str, str]) -> Config:
    """The config file, or exit 2 with ``config_invalid``."""
    try:
        return load_config(env)
    except AgentrtError as exc:
        _fail(exc.code, exc.detail)


def resolve_for_cli(
    env: Mapping[str, str],
    agent: str | None,
    *,
    protocol: str | None = None,
    model: str | None = None,
    executable: str | None = None,
    config: Config | None = None,
) -> ResolvedAgent:
    """:func:`~agentrt._resolve_agent.resolve_agent`, exiting 2 with the error's code on failure."""
    try:
        return resolve_agent(env, agent, executable=executable, protocol=protocol, model=model, config=config)
    except AgentrtError as exc:
        _fail(exc.code, exc.detail)


def _describe(agent: AgentConfig, default: str | None) -> dict[str, Any]:
    permissions = None
    if agent.permissions is not None:
        p = agent.permissions
        permissions = {"mode": p.mode, "allow": [mask_text(r) for r in p.allow], "deny": [mask_text(r) for r in p.deny]}
    return {
        "name": agent.name,
        "default": agent.name == default,
        "executable": agent.executable,
        "found": agent.found,
        "args": mask_args(agent.args),
        "env": mask_env(agent.env),
        "protocol": agent.protocol,
        "model": agent.model,
        "permissions": permissions,
        "remote_api_opt_in": agent.remote_api_opt_in,
        "partial_messages": agent.partial_messages,
        "preset": agent.preset,
        "first_output_timeout": agent.first_output_timeout,
    }


@click.group()
def agents() -> None:
    """Named agents of the config file (AGENTRT_CONFIG, else $XDG_CONFIG_HOME/agentrt/config.toml)."""


@agents.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per agent (secrets masked).")
def list_cmd(as_json: bool) -> None:
    """Every configured agent, the default marked with *."""
    cfg = load_config_for_cli(os.environ)
    if as_json:
        for agent in cfg.agents.values():
            click.echo(orjson.dumps(_describe(agent, cfg.default_agent)).decode())
        return
    if not cfg.agents:
        click.echo(f"no agents in {cfg.path}")
        return
    for agent in cfg.agents.values():
        mark = "*" if agent.name == cfg.default_agent else " "
        missing = "" if agent.found else "  (not on PATH)"
        click.echo(f"{mark} {agent.name}\t{agent.protocol or 'awp-jsonl'}\t{agent.model or '-'}\t"
                   f"{agent.executable}{missing}")


@agents.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="The agent as one JSON object (secrets masked).")
def show_cmd(name: str, as_json: bool) -> None:
    """One agent's settings; secrets in args, env and rules are shown as **** (see docs/approval.md)."""
    cfg = load_config_for_cli(os.environ)
    agent = cfg.agents.get(name)
    if agent is None:
        _fail("unknown_agent", f"no agent named {name[:64]!r} in {cfg.path}")
    info = _describe(agent, cfg.default_agent)
    if as_json:
        click.echo(orjson.dumps(info).decode())
        return
    click.echo(f"agent:      {agent.name}{'  (default)' if info['default'] else ''}")
    click.echo(f"executable: {agent.executable}{'' if agent.found else '  (not on PATH)'}")
    click.echo(f"args:       {orjson.dumps(info['args']).decode()}")
    click.echo(f"protocol:   {agent.protocol or 'awp-jsonl (default)'}")
    click.echo(f"model:      {agent.model or '-'}")
    click.echo(f"preset:     {agent.preset or '-'}")
    click.echo(f"partial_messages: {'true' if agent.partial_messages else 'false'}")
    click.echo(f"first_output_timeout: {_bound(agent.first_output_timeout)}")
    for key, value in info["env"].items():
        click.echo(f"env:        {key}={value}")
    if info["permissions"] is not None:
        p = info["permissions"]
        click.echo(f"permissions: mode={p['mode'] or '-'} allow={p['allow']} deny={p['deny']}")


def _bound(seconds: float | None) -> str:
    if seconds is None:
        return "- (the default, or AGENTRT_FIRST_OUTPUT_TIMEOUT)"
    return "0 (no bound)" if seconds == 0 else f"{seconds:g} s"


def _reference_agent() -> tuple[str, list[str]]:
    """``agentrt agent`` as an executable and prefix: the console script beside this interpreter."""
    script = os.path.join(os.path.dirname(sys.executable), "agentrt")
    if os.path.isfile(script) and not os.path.islink(script):
        return script, ["agent"]
    return os.path.realpath(sys.executable), ["-c", "from agentrt.cli import main; main()", "agent"]


def _env_pairs(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for index, pair in enumerate(pairs):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            # Never echo the pair: its value may be a secret.
            _fail("invalid_env_option", f"--env #{index + 1} must look like KEY=VALUE")
        out[key] = value
    return out


@agents.command("add")
@click.argument("name")
@click.option("--executable", help="Absolute path, or a bare name looked up on PATH when the file is read.")
@click.option("--arg", "args", multiple=True, help="A prefix argument (repeat for several).")
@click.option("--env", "env_pairs", multiple=True, metavar="KEY=VALUE", help="An env entry for the agent (repeatable).")
@click.option("--protocol", help="Dialect the agent speaks (default awp-jsonl).")
@click.option("-m", "--model", help="Model id passed to the agent.")
@click.option("--endpoint", metavar="URL",
              help="Save the reference agent (agentrt agent) against this OpenAI-compatible endpoint.")
@click.option("--local-model", is_flag=True,
              help=f"Save the reference agent set up for the local model server (default {LOCAL_MODEL_ENDPOINT}).")
@click.option("--preset", metavar="|".join(PRESETS),
              help="Fill in protocol, args and env for a known agent CLI (see docs/agents.md).")
@click.option("--dir", "dirs", multiple=True, metavar="DIR",
              help="With --preset: look for the executables here before PATH (repeatable).")
@click.option("--default", "make_default", is_flag=True, help="Also make it the default_agent.")
@click.option("--replace", is_flag=True, help="Overwrite an agent of the same name.")
def add_cmd(
    name: str, executable: str | None, args: tuple[str, ...], env_pairs: tuple[str, ...], protocol: str | None,
    model: str | None, endpoint: str | None, local_model: bool, make_default: bool, replace: bool,
    preset: str | None = None, dirs: tuple[str, ...] = (),
) -> None:
    """Save an agent in the config file (created 0600 if missing; comments and layout kept).

    The executable is checked at once (exists, regular file, executable); a
    symbolic link is resolved and the file it names is saved.
    """
    entries = _env_pairs(env_pairs)
    arg_list = list(args)
    remote = False
    notes: list[str] = []
    if preset is not None:
        if endpoint is not None or local_model:
            _fail("conflicting_options", "--preset names an agent CLI: drop --endpoint/--local-model")
        try:
            filled = fill_preset(preset, dirs=dirs, executable=executable)
        except AgentrtError as exc:
            _fail(exc.code, exc.detail)
        executable = filled.executable.saved
        arg_list = [*filled.args, *arg_list]
        protocol = protocol or filled.protocol
        entries = {**filled.env, **entries}
        notes += filled.notes
        if filled.executable.link:
            notes.append(f"{filled.executable.link} is a symbolic link: saved the file it names")
        if filled.copied:
            notes.append(f"copied from this shell: {', '.join(filled.copied)}")
    elif executable is not None and endpoint is None and not local_model:
        try:
            checked = check_executable(executable, keep_bare=True)
        except AgentrtError as exc:
            _fail(exc.code, exc.detail)
        executable = checked.saved
        if checked.link:
            notes.append(f"{checked.link} is a symbolic link to {checked.real}")
    if endpoint is not None or local_model:
        if executable is not None:
            _fail("conflicting_options", "--endpoint/--local-model save the reference agent: drop --executable")
        executable, prefix = _reference_agent()
        arg_list = prefix + arg_list
        protocol = protocol or "awp-jsonl"
        entries = {"AGENTRT_API_BASE_URL": endpoint or LOCAL_MODEL_ENDPOINT, **entries}
        if local_model:
            try:
                demo = importlib.import_module("agentrt_local_model._demo")
            except ImportError:
                _fail("plugin_missing", "--local-model needs the agentrt-local-model plugin")
            model = model or str(demo.MODEL_ALIAS)
            # A base model continues documents: the demo's preamble makes an answer its likeliest text.
            entries.setdefault("AGENTRT_SYSTEM_PROMPT", str(demo.FRAME))
        if model:
            entries.setdefault("AGENTRT_MODEL", model)
        if contains_remote_url(entries["AGENTRT_API_BASE_URL"]):
            # Naming a remote endpoint here is the explicit opt-in both the
            # launch contract and the reference agent ask for.
            entries.setdefault("AGENTRT_REMOTE_API_OPT_IN", "1")
            remote = True
    if executable is None:
        _fail("missing_option", "agents add needs --executable, --endpoint or --local-model")
    table: dict[str, Any] = {"executable": executable}
    if arg_list:
        table["args"] = arg_list
    if protocol:
        table["protocol"] = protocol
    if model:
        table["model"] = model
    if entries:
        table["env"] = entries
    if remote:
        table["remote_api_opt_in"] = True
    if preset is not None:
        table["preset"] = preset
        if PRESETS[preset].first_output_timeout is not None:  # a slow starter: the bound it needs, editable
            table["first_output_timeout"] = PRESETS[preset].first_output_timeout
    _save(name, table, make_default=make_default, replace=replace)
    for note in notes:
        click.echo(f"agentrt: note: {note}")
    click.echo(f"saved agent {name}: {executable}; try: agentrt chat -a {name}")


@agents.command("rm")
@click.argument("name")
def rm_cmd(name: str) -> None:
    """Remove an agent from the config file (and default_agent if it named it)."""
    import tomlkit

    cfg = load_config_for_cli(os.environ)
    if name not in cfg.agents:
        _fail("unknown_agent", f"no agent named {name[:64]!r} in {cfg.path}")
    doc = tomlkit.parse(cfg.path.read_text(encoding="utf-8"))
    del doc["agents"][name]
    if doc.get("default_agent") == name:
        del doc["default_agent"]
    _write(cfg, doc.as_string())
    click.echo(f"removed agent {name}")


def _save(name: str, table: dict[str, Any], *, make_default: bool, replace: bool) -> None:
    import tomlkit

    cfg = load_config_for_cli(os.environ)
    if name in cfg.agents and not replace:
        _fail("agent_exists", f"an agent named {name[:64]!r} is already in {cfg.path} (use --replace)")
    doc = tomlkit.parse(cfg.path.read_text(encoding="utf-8")) if cfg.exists else tomlkit.document()
    if make_default:
        doc["default_agent"] = name
    section = doc.get("agents")
    if section is None:
        section = tomlkit.table(is_super_table=True)
        doc["agents"] = section
    item = tomlkit.table()
    for key, value in table.items():
        if key == "env":
            env_table = tomlkit.table()
            env_table.update(value)
            item["env"] = env_table
        else:
            item[key] = value
    section[name] = item
    _write(cfg, doc.as_string())


def _write(cfg: Config, text: str) -> None:
    """Check ``text`` as the config it would become, then replace the file atomically (mode 0600)."""
    try:
        parse_config(text, cfg.path, os.environ)
    except AgentrtError as exc:
        _fail(exc.code, exc.detail)
    path = cfg.path
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # Env entries may hold tokens: the file is the user's only, like the database.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
