"""Who may reach the service: the ``Host`` header (against DNS rebinding), the ``Origin`` header (other web
pages), CORS for the origins ``--cors-origin`` allows, the ``Content-Type`` of bodies, and the security
headers of every answer. ``Policy.of(Access(...))`` is built once; the gate asks it per request."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from sbert.serve.errors import ApiError
from sbert.serve.settings import Access

WILDCARDS = frozenset({"", "0.0.0.0", "::"})
DEFAULT_PORTS = {"http": "80", "https": "443"}
BODY_METHODS = frozenset({b"POST", b"PUT", b"PATCH"})
SECURITY_HEADERS = [(b"x-content-type-options", b"nosniff")]  # on every answer; the page adds its CSP
PREFLIGHT_HEADERS = [
    (b"access-control-allow-methods", b"GET, POST"),
    (b"access-control-allow-headers", b"Authorization, Content-Type"),
    (b"access-control-max-age", b"600"),
]


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """Whether the address ``host`` (as ``--host`` gives it) is reachable from this machine alone."""
    bound = host.strip("[]").lower()
    ip = _ip(bound)
    return bound == "localhost" or bool(ip and ip.is_loopback)


def host_name(value: str) -> str | None:
    """The host name of a ``Host`` header (port and IPv6 brackets removed, lower case), or None if malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name if _ip(name) else None
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    return name.rstrip(".") or None


def _netloc(scheme: str, netloc: str) -> str:
    """``host[:port]`` in lower case, the scheme's default port left out."""
    netloc = netloc.lower()
    default = DEFAULT_PORTS.get(scheme)
    if default and netloc.endswith(":" + default):
        netloc = netloc[: -len(default) - 1]
    return netloc


def _origin(value: str) -> str:
    """An origin as compared: ``scheme://host[:port]``, lower case, no default port, no trailing slash."""
    scheme, sep, netloc = value.strip().rstrip("/").partition("://")
    return f"{scheme.lower()}://{_netloc(scheme.lower(), netloc)}" if sep else value.strip().lower()


@dataclass(frozen=True)
class Policy:
    """The ``Host`` names and cross-origin ``Origin``s accepted (see ``settings.Access``)."""

    names: frozenset[str]
    loopback: bool  # bound to a loopback address: any loopback address names it
    any_ip: bool  # bound to every address: any IP address names it
    any_host: bool
    origins: frozenset[str]
    any_origin: bool

    @classmethod
    def of(cls, access: Access) -> Policy:
        bound = access.host.strip("[]").lower()
        loopback = is_loopback(bound)
        names = {bound, "localhost"} if loopback or bound in WILDCARDS else {bound}
        names |= {host_name(h) or h.lower() for h in access.allowed_hosts}
        return cls(
            names=frozenset(str(ipaddress.ip_address(n)) if _ip(n) else n for n in names),
            loopback=loopback,
            any_ip=bound in WILDCARDS,
            any_host="*" in access.allowed_hosts,
            origins=frozenset(_origin(o) for o in access.cors_origins if o != "*"),
            any_origin="*" in access.cors_origins,
        )

    def host_allowed(self, host: bytes | None) -> bool:
        """Whether a ``Host`` header names this service (none at all: not a browser, allowed)."""
        if host is None or self.any_host:
            return True
        name = host_name(host.decode("latin-1"))
        if name is None:
            return False
        ip = _ip(name)
        if ip is None:
            return name in self.names
        return self.any_ip or (self.loopback and ip.is_loopback) or str(ip) in self.names

    def cross_origin(self, origin: bytes | None, host: bytes | None) -> str | None:
        """The request's ``Origin`` when it is another site's (None: no Origin, or the service's own page)."""
        if origin is None:
            return None
        value = origin.decode("latin-1")
        scheme, sep, netloc = value.strip().lower().partition("://")
        if sep and host is not None and _netloc(scheme, netloc) == _netloc(scheme, host.decode("latin-1")):
            return None
        return value

    def origin_allowed(self, origin: str) -> bool:
        return self.any_origin or _origin(origin) in self.origins


def host_refused(host: bytes) -> ApiError:
    name = host.decode("latin-1")
    return ApiError(
        400,
        f"the Host header {name!r} does not name this server: start sbert serve with --allowed-host "
        f"{host_name(name) or name} to accept it (guards against DNS rebinding)",
        code="host_not_allowed",
    )


def origin_refused(origin: str) -> ApiError:
    return ApiError(
        403,
        f"requests from the web page at {origin!r} are refused: start sbert serve with --cors-origin {origin} "
        "to allow that origin",
        code="origin_not_allowed",
        kind="permission_error",
    )


def content_type_refused(method: bytes, content_type: bytes | None) -> ApiError | None:
    """A 415 for a request body that is not sent as ``application/json`` (None when it is, or has no body)."""
    if method not in BODY_METHODS:
        return None
    media = (content_type or b"").split(b";", 1)[0].strip().lower()
    if media == b"application/json":
        return None
    got = f"got {content_type.decode('latin-1')!r}" if content_type else "none was sent"
    return ApiError(
        415, f"the request body must be sent as 'Content-Type: application/json' ({got})", code="unsupported_media_type"
    )


def cors_headers(origin: str) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin")]
