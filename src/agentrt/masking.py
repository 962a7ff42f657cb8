"""Secret masking for everything agentrt shows a person: one set of rules, three shapes of input.

Whatever is displayed (``agentrt agents show`` / ``list``, error messages, an
agent's last stderr lines, recorded approval summaries, the web UI) goes
through these functions first; a secret they recognise is shown as
:data:`MASK` (``****``).  What is recognised:

* **key shapes**, wherever they appear: provider and platform keys
  (``sk-…``, ``pk-…``, ``rk-…``, ``ghp_…`` and the other GitHub prefixes,
  ``github_pat_…``, ``glpat-…``, ``xoxb-…`` and the other Slack prefixes,
  ``AKIA…``, ``AIza…``, ``hf_…``, ``npm_…``) and JSON web tokens (``eyJ….….…``);
* **credentials after a scheme word**: ``Bearer <token>``, ``Basic <token>``,
  ``token <token>`` (the word stays, the value goes);
* **URL credentials**: ``https://user:pass@host`` (any scheme) becomes
  ``https://****@host``;
* **named values** in text: ``api_key=…``, ``"password": "…"``,
  ``X-Auth-Token: …``: a name holding ``token``, ``secret``, ``key``,
  ``passw``, ``pwd``, ``auth``, ``credential``, ``cookie`` or ``private``
  (names ending in ``Error``/``Exception`` excepted: ``KeyError: 'x'`` says why);
* in an **argument list** (:func:`mask_args`), the value of an option whose
  name holds one of those words, both ``--api-key VALUE`` and
  ``--api-key=VALUE``, besides the text rules on every argument;
* in an **environment** (:func:`mask_env`), the whole value of a variable
  whose name looks secret (the words above, and ``session``), and the text
  rules on every other value (a neutral name holding ``Bearer <token>`` or a
  key shape is masked too).

Masking is for display: it may hide a harmless value that looks secret, and
it cannot know a secret of no recognisable shape under a neutral name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

__all__ = ["MASK", "looks_secret", "mask_args", "mask_env", "mask_secrets", "mask_text"]

MASK = "****"
"""What a masked value is shown as."""

_WORDS = r"token(?!s)|secret|key|passw|pwd|auth(?!ors?\b)|credential|cookie|private"
_TOKEN_RE = re.compile(
    r"\b(?:sk|pk|rk|xox[abeprs]|gh[pousr]|github_pat|glpat|hf|npm)[-_][-_A-Za-z0-9]{8,}"
    r"|\bAKIA[A-Z0-9]{12,}"
    r"|\bAIza[-_A-Za-z0-9]{20,}"
    r"|\beyJ[-_A-Za-z0-9]{8,}\.[-_A-Za-z0-9]{8,}\.[-_A-Za-z0-9]*"
)
_AUTH_RE = re.compile(r"(?i)\b(bearer|basic|token)(\s+)(?!\*\*\*\*)[-._~+/A-Za-z0-9]{8,}=*")
_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)(?!\*\*\*\*@)[^/@\s]+@")
_PAIR_RE = re.compile(rf"(?i)\b([\w-]*(?:{_WORDS})[\w-]*)([\"']?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s\"'&,;]+)")
_OPTION_RE = re.compile(rf"(?i)(--[\w-]*(?:{_WORDS})[\w-]*)(?:=(.*))?", re.DOTALL)
_ENV_NAME_RE = re.compile(rf"(?i){_WORDS}|session")


def _mask_pair(match: re.Match[str]) -> str:
    name, sep, value = match.group(1), match.group(2), match.group(3)
    if name.lower().endswith(("error", "exception")):
        return match.group(0)
    bare = value.strip("\"'")
    if bare.lower() in ("bearer", "basic", "token") or bare == MASK:  # `Authorization: Bearer ****`, done
        return match.group(0)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{name}{sep}{quote}{MASK}{quote}"


def mask_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret the module's rules recognise as ``****``.

    ``env``: besides, the literal values of its secret-looking entries (see
    :func:`mask_env`), wherever they appear (an agent echoing its own key).
    """
    if env:
        shown = mask_env(env)
        # Longest first, so a secret containing another is masked whole.
        values = {env[k] for k, v in shown.items() if v != env[k] and len(env[k]) >= 4}
        for value in sorted(values, key=len, reverse=True):
            text = text.replace(value, MASK)
    text = _TOKEN_RE.sub(MASK, text)
    text = _AUTH_RE.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)
    text = _USERINFO_RE.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    return _PAIR_RE.sub(_mask_pair, text)


def mask_secrets(text: str) -> str:
    """:func:`mask_text` without an environment (the name :mod:`agentrt.approval` has always exported)."""
    return mask_text(text)


def looks_secret(value: str) -> bool:
    """True if ``value`` holds something the text rules would mask."""
    return mask_text(value) != value


def mask_args(args: Sequence[str]) -> list[str]:
    """An argument list for display: secret options' values masked, every argument through :func:`mask_text`.

    ``["--api-key", "abc", "--token=xyz", "-v"]`` is shown as
    ``["--api-key", "****", "--token=****", "-v"]``.  The word after a secret
    option is taken as its value unless it is itself an option (``--…``).
    """
    shown: list[str] = []
    value_next = False
    for arg in args:
        if value_next and not arg.startswith("--"):
            shown.append(MASK)
            value_next = False
            continue
        value_next = False
        option = _OPTION_RE.fullmatch(arg)
        if option is None:
            shown.append(mask_text(arg))
        elif option.group(2) is None:
            shown.append(arg)
            value_next = True
        else:
            shown.append(f"{option.group(1)}={MASK}")
    return shown


def mask_env(env: Mapping[str, str]) -> dict[str, str]:
    """An environment for display: a secret-looking name's value whole, else the text rules on the value."""
    return {key: MASK if _ENV_NAME_RE.search(key) else mask_text(value) for key, value in env.items()}
