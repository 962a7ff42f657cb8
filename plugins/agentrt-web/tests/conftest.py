"""Fixtures of the web UI tests: a real ``agentrt web`` subprocess, a fixture agent, a browser."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrt.testing.pytest_plugin import pytest_configure as pytest_configure
from agentrt.testing.pytest_plugin import pytest_unconfigure as pytest_unconfigure

HERE = Path(__file__).parent
AGENT_SOURCE = HERE / "fixture_web_agent.py"
# The scripted FastAgent binary of the bots pages lives with the FastAgent plugin's tests.
FASTAGENT_FIXTURE = HERE.parents[1] / "agentrt-fastagent" / "tests" / "fixtures" / "fake_fastagent.py"
CHROMIUM = Path("/usr/bin/chromium")
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0
LLM_SECRET = "sk-web-test-secret-0123456789"
WEB_TOKEN = "web-token-for-tests-0123456789"


def write_agent(directory: Path) -> Path:
    """An executable fixture agent script (the launch contract wants a regular executable)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "web-agent"
    path.write_text(
        f"#!{sys.executable} -S\nimport runpy\nrunpy.run_path({str(AGENT_SOURCE)!r}, run_name='__main__')\n"
    )
    path.chmod(0o755)
    return path


def write_bots(tmp: Path, scenario: str = "stateful_restore_or_qr") -> Path:
    """A bots.toml with one bot ``b1`` over the scripted FastAgent fixture; returns the config path."""
    bindir = tmp / "fa-bin"
    bindir.mkdir(parents=True, exist_ok=True)
    binary = bindir / "fastagent"
    binary.write_text(f"#!{sys.executable} -SE\n" + FASTAGENT_FIXTURE.read_text())
    binary.chmod(0o755)
    (bindir / "fastagent-fixture.json").write_text(json.dumps({"scenario": scenario, "step_delay_ms": 5}))
    cfg = tmp / "bots.toml"
    cfg.write_text(
        "[supervisor]\n"
        f'instances_dir = "{tmp / "instances"}"\n'
        "reconcile_interval = 0.1\n"
        "backoff = [0.2]\n"
        'default_profile = "test"\n'
        f'binary = "{binary}"\n'
        "stop_timeout = 2.0\n"
        "[profiles.test]\n"
        'provider = "openai"\nmodel = "gpt-test"\napi_key_env = "WEB_TEST_LLM_KEY"\n'
        "[bots.b1]\n"
    )
    return cfg


def base_env(tmp: Path, agent: Path, **extra: str) -> dict[str, str]:
    """The server's environment: its own database, the fixture agent, no inherited secrets."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp / "home"),
        "LANG": "C.UTF-8",
        "AGENTRT_DATABASE_URL": f"sqlite://{tmp / 'agentrt.db'}",
        "AWP_AGENT_CLI_EXECUTABLE": str(agent),
        "AWP_AGENT_CLI_ARGS_JSON": json.dumps(["--argv-log", str(tmp / "argv.log")]),
        "AGENTRT_BOTS_CONFIG": str(tmp / "no-bots.toml"),
        "WEB_TEST_LLM_KEY": LLM_SECRET,
    }
    env.update(extra)
    return env


class WebServer:
    """``python -m agentrt web`` as a real subprocess on a free port."""

    def __init__(self, env: dict[str, str], *args: str) -> None:
        self.env = env
        self.args = args
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.output = b""

    def start(self) -> WebServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentrt", "web", "--port", "0", *self.args],
            env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        assert self.proc.stdout is not None
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + START_TIMEOUT
        while not self.url:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                self.stop()
                raise AssertionError(f"agentrt web did not start: {self.output!r}")
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                self.proc.wait(5)
                raise AssertionError(f"agentrt web exited {self.proc.returncode}: {self.output!r}")
            self.output += chunk
            m = re.search(rb"serving on (http://\S+)", self.output)
            if m:
                self.url = m.group(1).decode()
        sel.close()
        return self

    def stop(self) -> int | None:
        """SIGTERM, then wait (bounded); returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if proc.stdout is not None:
            self.output += proc.stdout.read() or b""
            proc.stdout.close()
        self.proc = None
        return proc.returncode


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return write_agent(tmp_path / "bin")


@pytest.fixture
def server_factory() -> Iterator[Any]:
    servers: list[WebServer] = []

    def factory(env: dict[str, str], *args: str) -> WebServer:
        srv = WebServer(env, *args).start()
        servers.append(srv)
        return srv

    yield factory
    for srv in servers:
        srv.stop()


def argv_log(tmp: Path) -> list[list[str]]:
    """Every argv the fixture agent was started with, in order."""
    path = tmp / "argv.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def agent_pids(tmp: Path) -> list[int]:
    """Every fixture agent process started so far."""
    path = tmp / "argv.log.pids"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


BROWSER_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A Chromium context (Debian's chromium through Playwright; never a downloaded browser)."""
    if not CHROMIUM.exists():
        # CI installs it (.ci/run) and must run these tests; elsewhere say what is missing.
        message = "chromium is not installed (apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=BROWSER_ARGS, viewport={"width": 1200, "height": 800},
        )
        ctx.set_default_timeout(15_000)
        try:
            yield ctx
        finally:
            ctx.close()


SHOTS = os.environ.get("AGENTRT_WEB_SCREENSHOTS")


def shot(page: Any, name: str) -> None:
    """Save a screenshot for the manual when asked to (AGENTRT_WEB_SCREENSHOTS=docs/images)."""
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / name))


def new_thread(page: Any, url: str) -> str:
    """Open a new thread from the index page; returns its name once its composer is there."""
    page.goto(url + "/")
    page.click("#new-thread")
    page.wait_for_url("**/threads/*")
    page.wait_for_selector("#prompt")
    return str(page.url.rsplit("/", 1)[1])


def say(page: Any, text: str) -> None:
    page.fill("#prompt", text)
    page.click("#send")


def last_assistant(page: Any) -> Any:
    return page.locator(".msg.assistant").last


@dataclasses.dataclass(frozen=True)
class Chat:
    """A page on a new thread of a real ``agentrt web`` (the fixture agent, a database of its own)."""

    server: WebServer
    page: Any
    thread: str

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture
def chat(tmp_path: Path, agent: Path, server_factory: Any, browser: Any) -> Chat:
    """The set-up most browser tests share: the server, a page, a new thread open in it."""
    server = server_factory(base_env(tmp_path, agent))
    page = browser.new_page()
    return Chat(server=server, page=page, thread=new_thread(page, server.url))

