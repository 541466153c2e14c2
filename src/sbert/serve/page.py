"""The service's web page: ``/`` and its files under ``/static/`` (plain HTML, CSS and JavaScript in
``static/``, shipped with the package; no build step). The page calls the JSON endpoints (/info,
/search, /similarity) like any client, sending the API key the person gives it; the page itself and its
files need no key (``auth.OPEN_PATHS``). The page is sent with a Content-Security-Policy that lets it load
only its own files and talk only to its own server, and never be framed by another site."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.responses import FileResponse
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).with_name("static")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


def add_page(app: FastAPI) -> None:
    """Serve the page at ``/`` and its files at ``/static/`` on ``app``."""

    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=PAGE_HEADERS)

    app.add_api_route("/", page, methods=["GET"], include_in_schema=False)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
