"""Named agents and the config file, for front ends that launch agents.

The public face of the config file (``$AGENTRT_CONFIG``, else
``$XDG_CONFIG_HOME/agentrt/config.toml``): a front-end plugin (a chat UI, a
web server) calls :func:`resolve_agent` to get the launch every core command
gets, so ``-a NAME``, ``default_agent`` and the ``AWP_AGENT_CLI_*`` variables
mean the same everywhere.  See ``docs/agents.md``.
"""

from __future__ import annotations

from ._config import AgentConfig as AgentConfig
from ._config import Config as Config
from ._config import Permissions as Permissions
from ._config import config_path as config_path
from ._config import load_config as load_config
from ._config import mask_env as mask_env
from ._config import parse_config as parse_config
from ._resolve_agent import ResolvedAgent as ResolvedAgent
from ._resolve_agent import resolve_agent as resolve_agent

__all__ = [
    "AgentConfig",
    "Config",
    "Permissions",
    "ResolvedAgent",
    "config_path",
    "load_config",
    "mask_env",
    "parse_config",
    "resolve_agent",
]
