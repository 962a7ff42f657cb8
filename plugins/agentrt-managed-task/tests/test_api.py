"""The public surface: the api module, docstrings, and the plugin's commands in ``agentrt --help``."""

from __future__ import annotations

import os
import subprocess
import sys

from agentrt_managed_task import api


def test_every_public_name_exists_and_is_documented() -> None:
    for name in api.__all__:
        value = getattr(api, name)
        if callable(value):
            assert value.__doc__, f"{name} has no docstring"


def test_commands_are_registered_and_the_plugin_stays_thin() -> None:
    agentrt = os.path.join(os.path.dirname(sys.executable), "agentrt")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    listing = subprocess.run([agentrt, "--help"], env=env, capture_output=True, text=True, timeout=30)
    assert listing.returncode == 0
    assert "control-plane" in listing.stdout and "worker" in listing.stdout
    code = (
        "import sys, agentrt_managed_task; "
        "heavy = {'httpx', 'starlette', 'hypercorn', 'redis', 'coredis', 'sqlite3', 'stamina'} & set(sys.modules); "
        "print(sorted(heavy))"
    )
    thin = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert thin.stdout.strip() == "[]"


def test_worker_cli_refuses_without_opt_in(tmp_path: object) -> None:
    agentrt = os.path.join(os.path.dirname(sys.executable), "agentrt")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "AWP_CONTROL_PLANE_API_KEY": "k" * 20}
    done = subprocess.run(
        [agentrt, "worker", "--control-plane", "http://127.0.0.1:1", "--allow", "echo", "--work-dir", str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2 and "trusted_task_execution_requires_opt_in" in done.stderr
    assert "k" * 20 not in done.stderr
