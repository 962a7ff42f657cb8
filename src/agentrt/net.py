"""Network rules shared by the core and the plugins: one answer to "is this host loopback?".

Two callers need two different answers, so there is one function with two
documented modes instead of several copies that disagree:

* **loose** (the default): ``localhost`` (any case) and every loopback
  address: ``127.0.0.0/8``, ``::1`` and IPv4-mapped ``::ffff:127.x.y.z``.  This
  is what a socket would really reach on this machine; the web UI's bind and
  ``Host`` check, the control-plane URL and the provider base URL use it
  (``http://127.0.0.2:8000`` is loopback, so plain HTTP is allowed there).
* **strict** (``strict=True``): exactly ``localhost``, ``127.0.0.1`` and
  ``::1``.  This is the original host's remote-URL rule for launch arguments
  and ``AWP_AGENT_CLI_ENV_JSON`` values (see ``docs/launch-contract.md``), which
  the launch contract pins: there ``127.0.0.2`` and ``0.0.0.0`` are *remote*
  and need the opt-in.

Neither mode resolves names (``localhost.example`` is not loopback) and
neither accepts ``0.0.0.0`` or ``::`` (they mean "every interface").

``numeric=True`` narrows either mode to addresses: ``localhost`` is then not
accepted, because a server resolves a bind name itself (``/etc/hosts``, DNS)
and what it reaches is not known here.  The control plane's bind address
(``agentrt-managed-task``'s ``check_bind_host``) uses the loose mode with it.
"""

from __future__ import annotations

import ipaddress

__all__ = ["STRICT_LOCAL_HOSTS", "is_loopback_host"]

STRICT_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
"""The hosts the strict mode accepts (hostnames lowercased, IPv6 without brackets)."""

_IPV6_LOOPBACK = ipaddress.IPv6Address("::1")


def is_loopback_host(host: str, *, strict: bool = False, numeric: bool = False) -> bool:
    """True if ``host`` names this machine's loopback interface.

    ``host`` is a hostname as a URL parser returns it or as a user types it:
    case does not matter and IPv6 brackets are optional (``[::1]`` and ``::1``).
    With ``strict=True`` only ``localhost``, ``127.0.0.1`` and ``::1`` (in any
    IPv6 spelling) count; otherwise any loopback address does.  With
    ``numeric=True`` only addresses count, never ``localhost`` (for a bind
    address).  See the module docstring for which caller uses which mode, and why.
    """
    name = host.lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost":
        return not numeric
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if strict:
        # Equality (not string comparison) so that every IPv6 spelling of ::1
        # is local, as the WHATWG parser of the original host normalizes them.
        return str(address) == "127.0.0.1" or address == _IPV6_LOOPBACK
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        # Python < 3.13 says ::ffff:127.0.0.1 is not loopback; the kernel routes it there.
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
