"""The public API of the FastAgent plugin (everything else in this package is private).

Import from here to embed the supervisor in a trio program, write a resolver,
use the stores, or sync managed skills yourself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._config import BotsConfig as BotsConfig
from ._config import config_path as config_path
from ._config import load_config as load_config
from ._dialect import INVALID_LINE as INVALID_LINE
from ._dialect import FastAgentDialect as FastAgentDialect
from ._launch import SAFE_INHERITED_ENV as SAFE_INHERITED_ENV
from ._launch import InstancePaths as InstancePaths
from ._launch import LlmProfile as LlmProfile
from ._launch import SandboxConfig as SandboxConfig
from ._launch import build_process_spec as build_process_spec
from ._launch import instance_paths as instance_paths
from ._launch import resolve_binary as resolve_binary
from ._reconciler import LOGIN_STATE_FILES as LOGIN_STATE_FILES
from ._schema import EVENT_TYPES as EVENT_TYPES
from ._schema import is_utc_timestamp as is_utc_timestamp
from ._schema import normalize_qr_url as normalize_qr_url
from ._schema import validate_line as validate_line
from ._skills import SyncResult as SyncResult
from ._skills import default_bundle_dir as default_bundle_dir
from ._skills import sync_managed_skills as sync_managed_skills
from ._store import JsonFileBotStore as JsonFileBotStore
from ._store import MemoryBotStore as MemoryBotStore
from ._store import TimelineSink as TimelineSink
from ._supervisor import DESIRED_STATES as DESIRED_STATES
from ._supervisor import INVALID_OUTPUT_MESSAGE as INVALID_OUTPUT_MESSAGE
from ._supervisor import STATES as STATES
from ._supervisor import Resolver as Resolver
from ._supervisor import Supervisor as Supervisor
from ._supervisor import SupervisorConfig as SupervisorConfig
from ._supervisor import open_supervisor as open_supervisor

__all__ = [
    "BotsConfig", "config_path", "load_config", "INVALID_LINE", "FastAgentDialect", "SAFE_INHERITED_ENV",
    "InstancePaths", "LlmProfile", "SandboxConfig", "build_process_spec", "instance_paths",
    "resolve_binary", "EVENT_TYPES", "is_utc_timestamp", "normalize_qr_url", "validate_line",
    "SyncResult", "default_bundle_dir", "sync_managed_skills", "JsonFileBotStore", "MemoryBotStore",
    "TimelineSink", "INVALID_OUTPUT_MESSAGE", "STATES", "Resolver", "Supervisor", "SupervisorConfig",
    "open_supervisor", "open_store", "DESIRED_STATES", "LOGIN_STATE_FILES",
]  # fmt: skip


def open_store(cfg: BotsConfig, env: Mapping[str, str]) -> tuple[Any, str]:
    """The bot store the configuration names (a plugin's, else the JSON file store), and its kind."""
    from ._cli import open_store as _open_store  # the command module: imported only when used

    return _open_store(cfg, env)
