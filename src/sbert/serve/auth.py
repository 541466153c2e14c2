"""Bearer-token authentication: ``Authorization: Bearer KEY`` on every path but the open ones."""

from __future__ import annotations

import hmac

from sbert.serve.errors import ApiError

OPEN_PATHS = frozenset({"/health", "/metrics", "/"})  # probes, scrapers and the web page need no key
OPEN_PREFIXES = ("/static/",)  # the page's files: no data, the page asks for the key to call the API


def authorized(api_key: str | None, path: str, headers: dict[bytes, bytes]) -> bool:
    """Whether a request for ``path`` with these (ASGI, lower-case) headers may go on."""
    if not api_key or path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
        return True
    header = headers.get(b"authorization", b"").decode("latin-1")
    token = header[7:] if header.lower().startswith("bearer ") else ""
    return hmac.compare_digest(token.encode(), api_key.encode())  # constant time: no key guessing by timing


def unauthorized() -> ApiError:
    return ApiError(401, "missing or wrong API key (send 'Authorization: Bearer <key>')", code="invalid_api_key")
