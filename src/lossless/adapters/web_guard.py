"""What every HTTP face of lossless refuses before any route runs: requests a web page could forge.

A server on loopback without tokens (the default of ``lcm serve``) trusts whoever reaches it, and
any web page the user visits can reach it: through the browser (cross-site requests) or by
pointing a name it controls at 127.0.0.1 (DNS rebinding).  :class:`BrowserGuard`, an ASGI
middleware that ``lcm serve`` (its API and its web pages) and ``lcm mcp --http`` wrap around their
apps, closes both ways.

Invariants:

* **Host is checked.**  A request whose ``Host`` names none of the server's own addresses —
  the loopback names (``localhost``, ``127.0.0.1``, ``::1``), the address it listens on, and the
  ``api_allowed_hosts`` setting — is refused with 421 before anything is read or written.  The
  port is not compared (a proxy may forward from another one).  A server listening on every
  interface (``0.0.0.0``, ``::``) cannot know its names: there the check applies only once
  ``api_allowed_hosts`` lists them (such a server needs ``api_tokens``, which a page cannot
  send).  ``*`` in ``api_allowed_hosts`` turns the check off.
* **Cross-origin requests are refused** (403): a request whose ``Origin`` is not the server's own
  (same scheme, host and port as its ``Host``) nor listed in ``api_allowed_origins``, and one
  without ``Origin`` whose ``Sec-Fetch-Site`` says ``cross-site`` or ``same-site``.  Clients that
  are not browsers send neither header and are not affected.
* **State-changing requests carry JSON.**  ``POST``, and ``PUT``, ``PATCH`` or ``DELETE`` with a
  body, must declare ``Content-Type: application/json`` (parameters such as ``charset`` allowed),
  else 415.  A browser sends ``text/plain``, form-encoded and multipart bodies cross-site without a
  preflight; it never sends ``application/json`` that way.
* Refusals have the API's one error shape, ``{"error": {"type", "message", "status",
  "retryable"}}``.  No I/O; pure ASGI (no web framework needed).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
from collections.abc import Iterable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LOOPBACK_NAMES", "BrowserGuard", "allowed_hosts", "host_name"]

#: The names of this machine that every server answers to.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
_WILDCARDS = ("", "0.0.0.0", "::", "*")
_WITH_BODY = frozenset({"PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


def host_name(host: str) -> str:
    """The name part of a ``Host`` header or address (``[::1]:8765`` → ``::1``), lower-cased."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    if host.count(":") == 1:
        return host.partition(":")[0]
    return host  # a bare name, or an IPv6 address without brackets


def allowed_hosts(listen_host: str | None, extra: Iterable[str] = ()) -> frozenset[str] | None:
    """The host names a server listening on ``listen_host`` answers to; None: any (see the invariants)."""
    extra = [e.strip().lower() for e in extra if e.strip()]
    if "*" in extra:
        return None
    listen = None if listen_host is None else host_name(listen_host)
    if listen is not None and listen in _WILDCARDS and not extra:
        return None
    names = set(LOOPBACK_NAMES) | {host_name(e) for e in extra}
    if listen is not None and listen not in _WILDCARDS:
        names.add(listen)
        with contextlib.suppress(ValueError):
            names.add(str(ipaddress.ip_address(listen)))
    return frozenset(names)


def _origin(value: str) -> tuple[str, str, int] | None:
    """``(scheme, host name, port)`` of an origin or URL; None if it is not one (``null``)."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return parts.scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[parts.scheme]


class BrowserGuard:
    """ASGI middleware applying the module's three checks to every HTTP request of ``app``."""

    def __init__(
        self,
        app: Any,
        *,
        listen_host: str | None = None,
        hosts: Iterable[str] = (),
        origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.hosts = allowed_hosts(listen_host, hosts)
        self.origins = {o for o in (_origin(entry) for entry in origins) if o is not None}

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.check(scope)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, kind, message = refusal
        body = json.dumps({"error": {"type": kind, "message": message, "status": status, "retryable": False}})
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body.encode()})

    def check(self, scope: MutableMapping[str, Any]) -> tuple[int, str, str] | None:
        """``(status, error type, message)`` of the refusal of this request, or None to let it through."""
        headers: dict[bytes, bytes] = {}
        for key, value in scope.get("headers") or ():
            headers.setdefault(bytes(key).lower(), bytes(value))
        host = headers.get(b"host", b"").decode("latin-1")
        if self.hosts is not None and host_name(host) not in self.hosts:
            return (
                421,
                "MisdirectedRequest",
                f"this server does not answer to Host {host!r} (a page on another site may be trying DNS "
                "rebinding); reach it by one of its own addresses, or list the name in api_allowed_hosts",
            )
        origin = headers.get(b"origin")
        if origin is not None:
            found = _origin(origin.decode("latin-1"))
            scheme = str(scope.get("scheme") or "http")
            own = _origin(f"{scheme}://{host}") if host else None
            if found is None or (found != own and found not in self.origins):
                return (
                    403,
                    "CrossOriginRefused",
                    f"cross-origin requests are refused (Origin {origin.decode('latin-1')!r}); a web page may not "
                    "call this server unless its origin is listed in api_allowed_origins",
                )
        elif headers.get(b"sec-fetch-site", b"").lower() in (b"cross-site", b"same-site"):
            return (
                403,
                "CrossOriginRefused",
                "cross-site requests are refused (Sec-Fetch-Site); a web page may not call this server",
            )
        method = str(scope.get("method", "GET")).upper()
        has_body = headers.get(b"content-length", b"0") != b"0" or b"transfer-encoding" in headers
        if method == "POST" or (method in _WITH_BODY and has_body):
            declared = headers.get(b"content-type", b"").decode("latin-1")
            media = declared.partition(";")[0].strip().lower()
            if media != "application/json":
                return (
                    415,
                    "UnsupportedMediaType",
                    f"this request must send a JSON body with Content-Type: application/json (got "
                    f"{declared or 'no Content-Type'!r})",
                )
        return None
