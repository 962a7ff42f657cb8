"""The AWP launch contract: which executable to run, with which argv and environment.

:meth:`LaunchSpec.from_env` validates the operator's ``AWP_AGENT_*`` variables
in the order and with the error codes of the original host (see
docs/launch-contract.md).  The child never inherits the parent's environment
wholesale: only :data:`SAFE_ENV_KEYS` plus the exact ``AWP_AGENT_CLI_ENV_JSON``
entries.  Error details name variables, keys and indexes, never values (an env
value may be a secret).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import attrs
import orjson

from ._launch_check import LaunchMemo, StatKey, check_executable_file
from .errors import AgentrtError
from .net import is_loopback_host

if TYPE_CHECKING:
    from ._process import ProcessSpec
    from .dialect import Dialect

__all__ = [
    "SAFE_ENV_KEYS",
    "DEFAULT_PROTOCOL",
    "LaunchSpec",
    "is_valid_session_id",
    "contains_remote_url",
    "js_len",
]

SAFE_ENV_KEYS: tuple[str, ...] = (
    # POSIX
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TERM",
    "COLORTERM",
    "TMPDIR",
    "TEMP",
    "TMP",
    "TZ",
    "USER",
    "LOGNAME",
    # Windows (the original host's names; case-sensitive like it)
    "Path",
    "PATHEXT",
    "SystemRoot",
    "WINDIR",
    "COMSPEC",
    "USERPROFILE",
    "LOCALAPPDATA",
    "APPDATA",
)
"""Parent variables a child inherits, each only if set: the OS basics, no tokens."""

DEFAULT_PROTOCOL = "awp-jsonl"
"""The protocol used when ``AWP_AGENT_CLI_PROTOCOL`` is unset or blank."""

MAX_ARGS = 128
MAX_ARG_LEN = 8192
MAX_ENV_ENTRIES = 128
MAX_ENV_VALUE_LEN = 32768
MAX_MODEL_LEN = 256

_PROTOCOL_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_SESSION_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,256}")
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# JavaScript's \s, spelled out: Python's \s differs (it includes U+001C..U+001F
# and excludes U+FEFF), and the candidate boundaries must match the original.
_JS_SPACE = "\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_URL_RE = re.compile(rf"https?://[^{_JS_SPACE}\"'<>]+", re.IGNORECASE)
# Characters String.prototype.trim() removes (the same set, range expanded).
_JS_TRIM = (
    "\t\n\x0b\x0c\r \xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_len(text: str) -> int:
    """Length in UTF-16 code units (JavaScript's ``String.length``)."""
    # Characters outside the BMP take two code units (a surrogate pair).
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def is_valid_session_id(session_id: str) -> bool:
    """True if ``session_id`` is a resumable native session id (``^[A-Za-z0-9._:-]{1,256}$``)."""
    return isinstance(session_id, str) and _SESSION_ID_RE.fullmatch(session_id) is not None


def contains_remote_url(text: str) -> bool:
    """True if ``text`` holds an http(s) URL whose host is not loopback.

    Every ``https?://...`` candidate is checked; one that does not parse counts
    as remote.  Only ``localhost``, ``127.0.0.1`` and ``[::1]`` are local, as in
    the original host (so ``127.0.0.2`` and ``localhost.evil`` are remote): the
    strict mode of :func:`agentrt.net.is_loopback_host`.
    """
    return any(_is_remote(match) for match in _URL_RE.findall(text))


def _is_remote(candidate: str) -> bool:
    # WHATWG URL parsing treats "\" as "/" in http(s) URLs; do the same before
    # splitting so that "http://evil\@localhost" is seen with host "evil".
    try:
        parts = urlsplit(candidate.replace("\\", "/"))
        host = parts.hostname
        parts.port  # noqa: B018  (raises ValueError on an invalid port, as URL() fails)
    except ValueError:
        return True
    if not host:
        return True
    return not is_loopback_host(host, strict=True)


def _trim(value: str | None) -> str:
    return value.strip(_JS_TRIM) if value else ""


def _validate_executable(raw: str | None, source: str) -> tuple[str, StatKey]:
    """The normalised path and what its ``lstat`` saw; raises the launch contract's codes."""
    return check_executable_file(_trim(raw), source)


def _validate_args(raw: str | Sequence[str] | None, source: str) -> tuple[str, ...]:
    if raw is None or isinstance(raw, str):
        text = _trim(raw)
        if not text:
            return ()
        try:
            parsed: Any = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise AgentrtError("invalid_cli_args_json", f"{source} is not valid JSON") from None
        if not isinstance(parsed, list):
            raise AgentrtError("invalid_cli_args_json", f"{source} must be a JSON array")
    else:
        parsed = list(raw)
    if len(parsed) > MAX_ARGS:
        raise AgentrtError("invalid_cli_args_json", f"{source} has more than {MAX_ARGS} items")
    for index, item in enumerate(parsed):
        if not isinstance(item, str):
            raise AgentrtError("invalid_cli_args_json", f"{source}[{index}] is not a string")
        if js_len(item) > MAX_ARG_LEN:
            raise AgentrtError("invalid_cli_args_json", f"{source}[{index}] is longer than {MAX_ARG_LEN}")
        if "\x00" in item:
            # exec() cannot carry a NUL; refuse it here rather than at spawn.
            raise AgentrtError("invalid_cli_args_json", f"{source}[{index}] contains a NUL character")
    return tuple(parsed)


def _validate_model(raw: str | None, source: str) -> str | None:
    value = _trim(raw)
    if not value:
        return None
    if js_len(value) > MAX_MODEL_LEN:
        raise AgentrtError("invalid_model", f"{source} is longer than {MAX_MODEL_LEN} characters")
    if _CONTROL_RE.search(value):
        raise AgentrtError("invalid_model", f"{source} contains control characters")
    return value


def _validate_protocol(raw: str | None, source: str) -> str:
    value = _trim(raw)
    if not value:
        return DEFAULT_PROTOCOL
    if _PROTOCOL_RE.fullmatch(value) is None:
        raise AgentrtError("invalid_cli_protocol", f"{source} is not a valid protocol name")
    return value


def _validate_env(
    raw: str | Mapping[str, Any] | None, *, remote_ok: bool, source: str = "AWP_AGENT_CLI_ENV_JSON"
) -> dict[str, str]:
    # A mapping (a config file's env table) is checked exactly like the JSON object.
    parsed: Any
    if isinstance(raw, Mapping):
        parsed = dict(raw)
    else:
        text = _trim(raw)
        if not text:
            return {}
        try:
            parsed = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise AgentrtError("invalid_cli_env_json", f"{source} is not valid JSON") from None
    if not isinstance(parsed, dict):
        raise AgentrtError("invalid_cli_env_json", f"{source} must be a JSON object")
    if len(parsed) > MAX_ENV_ENTRIES:
        raise AgentrtError("cli_env_too_large", f"{source} has more than {MAX_ENV_ENTRIES} entries")
    entries: dict[str, str] = {}
    for index, (key, value) in enumerate(parsed.items()):
        if _ENV_KEY_RE.fullmatch(key) is None:
            # The key itself may be garbage or sensitive: name its position only.
            raise AgentrtError("invalid_cli_env_entry", f"{source} entry #{index} has an invalid name")
        if not isinstance(value, str):
            raise AgentrtError("invalid_cli_env_entry", f"{source}[{key}] is not a string")
        if "\x00" in value:
            raise AgentrtError("invalid_cli_env_entry", f"{source}[{key}] contains a NUL character")
        if js_len(value) > MAX_ENV_VALUE_LEN:
            raise AgentrtError("cli_env_value_too_large", f"{source}[{key}] is longer than {MAX_ENV_VALUE_LEN}")
        entries[key] = value
    if not remote_ok:
        for key, value in entries.items():
            if contains_remote_url(value):
                raise AgentrtError(
                    "remote_api_requires_explicit_opt_in",
                    f"{source}[{key}] holds a remote URL; set AWP_AGENT_REMOTE_API_OPT_IN=1 to allow it",
                )
    return entries


@functools.cache
def _process_spec_type() -> type[ProcessSpec]:
    # Imported on first use (this module stays light), then without an import statement per spawn.
    from ._process_types import ProcessSpec

    return ProcessSpec


@attrs.frozen(kw_only=True)
class LaunchSpec:
    """A validated agent CLI launch: executable, prefix args, env entries, protocol, model."""

    executable: str
    prefix_args: tuple[str, ...] = ()
    env_entries: Mapping[str, str] = attrs.field(factory=dict)
    protocol: str = DEFAULT_PROTOCOL
    model: str | None = None
    remote_opt_in: bool = False
    partial_messages: bool = True
    """Ask the CLI for live deltas where its dialect can (stream-json: ``--include-partial-messages``)."""
    _memo: LaunchMemo = attrs.field(factory=LaunchMemo, init=False, eq=False, repr=False)

    @classmethod
    def from_env(
        cls,
        environ: Mapping[str, str],
        /,
        *,
        executable: str | None = None,
        args: str | Sequence[str] | None = None,
        protocol: str | None = None,
        model: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LaunchSpec:
        """Validate the ``AWP_AGENT_*`` variables of ``environ``; keyword values override them.

        ``args`` may be a JSON array text (as in ``AWP_AGENT_CLI_ARGS_JSON``) or a
        sequence of strings; either is validated the same way.  ``env`` is the
        child's environment entries as a mapping, validated exactly as the JSON
        object of ``AWP_AGENT_CLI_ENV_JSON`` (same codes, same limits, same remote
        URL rule); given, it replaces that variable.  Order and codes:
        executable, args, remote URL in args, model, protocol, env entries,
        remote URL in env values.  This performs one ``lstat`` of the executable.
        """
        env_entries: str | Mapping[str, Any] | None = environ.get("AWP_AGENT_CLI_ENV_JSON")
        env_source = "AWP_AGENT_CLI_ENV_JSON"
        if env is not None:
            if not isinstance(env, Mapping):
                raise AgentrtError("invalid_cli_env_json", "env must be a mapping of names to strings")
            env_entries, env_source = env, "env"
        remote_ok = environ.get("AWP_AGENT_REMOTE_API_OPT_IN") == "1"
        if executable is None:
            checked = _validate_executable(environ.get("AWP_AGENT_CLI_EXECUTABLE"), "AWP_AGENT_CLI_EXECUTABLE")
        else:
            checked = _validate_executable(executable, "executable")
        if args is None:
            prefix = _validate_args(environ.get("AWP_AGENT_CLI_ARGS_JSON"), "AWP_AGENT_CLI_ARGS_JSON")
        else:
            prefix = _validate_args(args, "args")
        if not remote_ok:
            for index, arg in enumerate(prefix):
                if contains_remote_url(arg):
                    raise AgentrtError(
                        "remote_api_requires_explicit_opt_in",
                        f"argument #{index} holds a remote URL; set AWP_AGENT_REMOTE_API_OPT_IN=1 to allow it",
                    )
        if model is None:
            chosen_model = _validate_model(environ.get("AWP_AGENT_DEFAULT_MODEL"), "AWP_AGENT_DEFAULT_MODEL")
        else:
            chosen_model = _validate_model(model, "model")
        if protocol is None:
            chosen_protocol = _validate_protocol(environ.get("AWP_AGENT_CLI_PROTOCOL"), "AWP_AGENT_CLI_PROTOCOL")
        else:
            chosen_protocol = _validate_protocol(protocol, "protocol")
        entries = _validate_env(env_entries, remote_ok=remote_ok, source=env_source)
        spec = cls(
            executable=checked[0],
            prefix_args=prefix,
            env_entries=entries,
            protocol=chosen_protocol,
            model=chosen_model,
            remote_opt_in=remote_ok,
        )
        spec._memo.exe = checked  # this check counts as the first spawn's
        return spec

    def argv(
        self,
        compat_args: Sequence[str] = (),
        *,
        resume: str | None = None,
        mcp_config: str | os.PathLike[str] | None = None,
    ) -> tuple[str, ...]:
        """``<exe> <prefix> <compat> [--model M] [--resume ID] [--mcp-config PATH]``.

        Raises ``invalid_resume_session_id`` for a resume id that is not
        ``^[A-Za-z0-9._:-]{1,256}$``.
        """
        argv = [self.executable, *self.prefix_args, *compat_args]
        if self.model:
            argv += ["--model", self.model]
        if resume is not None:
            if not is_valid_session_id(resume):
                raise AgentrtError("invalid_resume_session_id", "the resume session id has an invalid shape")
            argv += ["--resume", resume]
        if mcp_config is not None:
            argv += ["--mcp-config", os.fspath(mcp_config)]
        return tuple(argv)

    def check_executable(self) -> None:
        """Re-check the executable as :meth:`from_env` did (absolute, regular file,
        not a symlink, executable); call it right before every spawn.

        Raises the launch contract's code (``cli_executable_is_symlink``,
        ``cli_executable_not_found``, ...) if the file was swapped since.  After
        one full check this costs one ``lstat``: while it shows the same file
        (device, inode, mode, owner, modification and change times) the
        verdict stands; anything else (a swap, a removal, a ``chmod``) is
        checked in full again.
        """
        self._memo.recheck(functools.partial(_validate_executable, self.executable, "executable"))

    def child_env(self, parent_env: Mapping[str, str]) -> dict[str, str]:
        """The child's complete environment: :data:`SAFE_ENV_KEYS` found in ``parent_env``
        overlaid with exactly the ``AWP_AGENT_CLI_ENV_JSON`` entries."""
        env = {key: parent_env[key] for key in SAFE_ENV_KEYS if key in parent_env}
        env.update(self.env_entries)
        return env

    def process_spec(
        self,
        dialect: Dialect,
        *,
        resume: str | None = None,
        mcp_config: str | os.PathLike[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        parent_env: Mapping[str, str] | None = None,
        shutdown_line: bytes | None = None,
    ) -> ProcessSpec:
        """What to spawn for ``dialect`` (its :meth:`~agentrt.dialect.Dialect.launch_args` go before ``--model``).

        ``parent_env`` defaults to ``os.environ`` (only allow-listed keys are
        read).  ``cwd`` must be a non-empty path without NUL
        (``invalid_working_directory``).
        """
        work_dir: str | None = None
        if cwd is not None:
            work_dir = os.fspath(cwd)
            if not isinstance(work_dir, str) or not work_dir or "\x00" in work_dir:
                raise AgentrtError("invalid_working_directory", "the working directory must be a non-empty path")
        launch = self
        if dialect.session_in_band:
            # The protocol carries the model and the session to resume, not argv.
            launch, resume = attrs.evolve(self, model=None), None
        compat = dialect.launch_args(self.prefix_args, partial_messages=self.partial_messages)
        argv = launch.argv(compat, resume=resume, mcp_config=mcp_config)
        env = self._shared_child_env(os.environ if parent_env is None else parent_env)
        return _process_spec_type()(argv=argv, env=env, cwd=work_dir, shutdown_line=shutdown_line)

    def _shared_child_env(self, parent_env: Mapping[str, str]) -> Mapping[str, str]:
        """:meth:`child_env` as a read-only mapping, built again only when an allow-listed parent value changed."""
        return self._memo.child_env(parent_env, SAFE_ENV_KEYS, self.child_env)
