"""``bots.toml``: supervisor settings, LLM profiles and (optionally) bots.

Location: ``$AGENTRT_BOTS_CONFIG`` if set, else
``$XDG_CONFIG_HOME/agentrt/bots.toml`` (``~/.config/agentrt/bots.toml``).  A
missing file means defaults and no profiles.  Secrets are best referenced by
the name of an environment variable (``api_key_env``), read when a bot starts;
an inline ``api_key`` is accepted but the file should then be private (0600)::

    [supervisor]
    instances_dir = "~/.local/share/agentrt/bots"   # <id>/{data,workspace,logs}
    store = "auto"            # "auto": a plugin's bot store if any, else "json"
    reconcile_interval = 2.0
    backoff = [5, 15, 30]
    max_restarts = 4
    stop_timeout = 3.0        # SIGTERM -> SIGKILL
    default_profile = "main"
    binary = "/opt/fastagent/bin/fastagent"   # FASTAGENT_BINARY_PATH wins

    [profiles.main]
    provider = "openai"
    model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"
    base_url = "https://api.openai.com/v1"   # optional
    api_type = "openai"                      # optional

    [bots.support]            # optional; ``agentrt bots add`` stores bots too
    profile = "main"
    sandbox_mode = "remote"   # or "disabled" (the default)
    sandbox_url = "http://sandbox-runtime:7001"
    sandbox_api_key_env = "SRT_API_KEY"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import attrs

from agentrt.bots import BotRecord
from agentrt.errors import AgentrtError

from ._launch import LlmProfile, SandboxConfig, check_bot_id
from ._supervisor import Resolver, SupervisorConfig

__all__ = ["BotsConfig", "config_path", "load_config", "data_home"]

_BOT_KEYS = {"profile", "sandbox_mode", "sandbox_url", "sandbox_api_key_env", "sandbox_api_key"}
_PROFILE_KEYS = {"provider", "model", "api_key", "api_key_env", "base_url", "api_type"}


def data_home(env: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/agentrt`` (``~/.local/share/agentrt``)."""
    base = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "share")
    return Path(base) / "agentrt"


def config_path(env: Mapping[str, str]) -> Path:
    """Where ``bots.toml`` is read from."""
    explicit = env.get("AGENTRT_BOTS_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "agentrt" / "bots.toml"


def _bad(path: Path, what: str) -> AgentrtError:
    return AgentrtError("bots_config_invalid", f"{path}: {what}")


def _str(path: Path, table: Mapping[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(path, f"{where}.{key} must be a string")
    return value


@attrs.frozen(kw_only=True)
class BotsConfig:
    """The parsed configuration file."""

    path: Path
    instances_dir: Path
    store: str = "auto"
    store_dir: Path
    reconcile_interval: float = 2.0
    backoff: tuple[float, ...] = (5.0, 15.0, 30.0)
    max_restarts: int = 4
    stop_timeout: float = 3.0
    default_profile: str | None = None
    binary: Path | None = None
    profiles: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    bots: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)

    def supervisor_config(self, env: Mapping[str, str]) -> SupervisorConfig:
        """The supervisor's tunables (``FASTAGENT_BINARY_PATH`` overrides ``binary``)."""
        binary = None if env.get("FASTAGENT_BINARY_PATH") else self.binary
        return SupervisorConfig(
            instances_dir=self.instances_dir, backoff=self.backoff, max_restarts=self.max_restarts,
            reconcile_interval=self.reconcile_interval, term_grace=self.stop_timeout, binary=binary,
            parent_env=env,
        )  # fmt: skip

    def resolver(self, env: Mapping[str, str]) -> Resolver:
        """Turns a bot record into its profile and sandbox, reading secrets from ``env``."""

        def resolve(rec: BotRecord) -> tuple[LlmProfile | None, SandboxConfig]:
            cfg = {**dict(rec.config or {}), **dict(self.bots.get(rec.bot_id, {}))}
            mode = cfg.get("sandbox_mode") or "disabled"
            key = cfg.get("sandbox_api_key") or (
                env.get(cfg["sandbox_api_key_env"]) if cfg.get("sandbox_api_key_env") else None
            )
            sandbox = SandboxConfig(mode=cast(Any, mode), url=cfg.get("sandbox_url"), api_key=key or None)
            name = cfg.get("profile") or self.default_profile
            prof = self.profiles.get(name) if isinstance(name, str) else None
            if prof is None:
                return None, sandbox
            api_key = prof.get("api_key") or (env.get(prof["api_key_env"], "") if prof.get("api_key_env") else "")
            profile = LlmProfile(
                name=cast(str, name), provider=prof.get("provider") or "", model=prof.get("model") or "",
                api_key=api_key, base_url=prof.get("base_url"), api_type=prof.get("api_type"),
            )  # fmt: skip
            return profile, sandbox

        return resolve


def _read(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise _bad(path, f"not valid TOML: {exc}") from None
    except OSError as exc:
        raise _bad(path, f"cannot be read: {exc.strerror}") from None


def load_config(env: Mapping[str, str] | None = None) -> BotsConfig:
    """Read and validate the configuration (blocking; small file)."""
    env = os.environ if env is None else env
    path = config_path(env)
    raw = _read(path)
    sup = raw.get("supervisor", {})
    profiles = raw.get("profiles", {})
    bots = raw.get("bots", {})
    for name, table in (("supervisor", sup), ("profiles", profiles), ("bots", bots)):
        if not isinstance(table, dict):
            raise _bad(path, f"[{name}] must be a table")
    home = data_home(env)
    instances = _str(path, sup, "instances_dir", "supervisor")
    store_dir = _str(path, sup, "store_dir", "supervisor")
    store = _str(path, sup, "store", "supervisor") or "auto"
    if store not in ("auto", "json", "plugin"):
        raise _bad(path, 'supervisor.store must be "auto", "json" or "plugin"')
    backoff = sup.get("backoff", [5, 15, 30])
    if (
        not isinstance(backoff, list)
        or not backoff
        or not all(isinstance(b, int | float) and not isinstance(b, bool) and b >= 0 for b in backoff)
    ):
        raise _bad(path, "supervisor.backoff must be a non-empty list of non-negative seconds")

    def number(key: str, default: float, minimum: float) -> float:
        value = sup.get(key, default)
        if not isinstance(value, int | float) or isinstance(value, bool) or value < minimum:
            raise _bad(path, f"supervisor.{key} must be a number >= {minimum}")
        return float(value)

    for pname, prof in profiles.items():
        if not isinstance(prof, dict):
            raise _bad(path, f"[profiles.{pname}] must be a table")
        unknown = set(prof) - _PROFILE_KEYS
        if unknown:
            raise _bad(path, f"[profiles.{pname}] has unknown keys {sorted(unknown)}")
        for key in _PROFILE_KEYS:
            _str(path, prof, key, f"profiles.{pname}")
    for bname, bot in bots.items():
        check_bot_id(bname)
        if not isinstance(bot, dict):
            raise _bad(path, f"[bots.{bname}] must be a table")
        unknown = set(bot) - _BOT_KEYS
        if unknown:
            raise _bad(path, f"[bots.{bname}] has unknown keys {sorted(unknown)}")
        for key in _BOT_KEYS:
            _str(path, bot, key, f"bots.{bname}")
    binary = _str(path, sup, "binary", "supervisor")
    max_restarts = sup.get("max_restarts", 4)
    if not isinstance(max_restarts, int) or isinstance(max_restarts, bool) or max_restarts < 1:
        raise _bad(path, "supervisor.max_restarts must be an integer >= 1")
    return BotsConfig(
        path=path,
        instances_dir=Path(instances).expanduser() if instances else home / "bots",
        store=store,
        store_dir=Path(store_dir).expanduser() if store_dir else home / "bot-store",
        reconcile_interval=number("reconcile_interval", 2.0, 0.01),
        backoff=tuple(float(b) for b in backoff),
        max_restarts=max_restarts,
        stop_timeout=number("stop_timeout", 3.0, 0.0),
        default_profile=_str(path, sup, "default_profile", "supervisor"),
        binary=Path(binary).expanduser() if binary else None,
        profiles=profiles,
        bots=bots,
    )
