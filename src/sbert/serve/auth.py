"""Bearer-token authentication: ``Authorization: Bearer KEY`` on every path but the open ones."""

from __future__ import annotations

import hmac
import os

from sbert.errors import SbertError
from sbert.serve import API_KEY_ENV
from sbert.serve.errors import ApiError

OPEN_PATHS = frozenset({"/health", "/metrics", "/"})  # probes, scrapers and the web page need no key
OPEN_PREFIXES = ("/static/",)  # the page's files: no data, the page asks for the key to call the API


class BadApiKeyError(SbertError, ValueError):
    """An API key that clients could not send (non-ASCII, spaces, control characters)."""


def api_key_from(option: str | None) -> str | None:
    """The key to require: ``option`` (``--api-key``), else ``$SBERT_API_KEY``, else None (an open server).
    An empty one is refused (``check_api_key``), not taken as none: it is what an unset variable gives
    (``--api-key "$KEY"``), and starting an open server instead would be a silent surprise."""
    return option if option is not None else os.environ.get(API_KEY_ENV)


def check_api_key(api_key: str | None) -> None:
    """Refuse, at start-up, a key that HTTP clients cannot send in ``Authorization: Bearer KEY``: it must
    be printable ASCII without spaces (characters ``!`` to ``~``). Anything else would lock every client out:
    the header is read as Latin-1 and clients such as OpenAI's refuse to send other characters. An empty
    key is refused too (None: no key)."""
    if api_key is not None and not api_key:
        raise BadApiKeyError(
            f"the API key is empty (--api-key or ${API_KEY_ENV}; an unset variable?): give a key of printable "
            f"ASCII, or leave out both to serve without one"
        )
    bad = next((c for c in api_key or "" if not "!" <= c <= "~"), None)
    if bad is not None:
        raise BadApiKeyError(
            f"the API key holds {bad!r} (U+{ord(bad):04X}): it must be printable ASCII without spaces "
            "(characters '!' to '~'), which every HTTP client can send in 'Authorization: Bearer KEY'"
        )


def authorized(api_key: str | None, path: str, headers: dict[bytes, bytes]) -> bool:
    """Whether a request for ``path`` with these (ASGI, lower-case) headers may go on."""
    if not api_key or path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
        return True
    header = headers.get(b"authorization", b"").decode("latin-1")
    token = header[7:] if header.lower().startswith("bearer ") else ""
    return hmac.compare_digest(token.encode(), api_key.encode())  # constant time: no key guessing by timing


def unauthorized() -> ApiError:
    return ApiError(401, "missing or wrong API key (send 'Authorization: Bearer <key>')", code="invalid_api_key")
