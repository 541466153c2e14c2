"""Other web pages and other host names cannot use the service (issue 22, item 2): the ``Host`` header must
name the server (DNS rebinding), a request from another origin is refused unless ``--cors-origin`` allows it
(shown in real Chromium, from a page on a second loopback port), bodies are taken only as JSON, and the page
is sent with its Content-Security-Policy."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from test_serve import Server, free_port, index  # noqa: E402,F401  (index: a fixture)
from test_web_page import browser  # noqa: E402,F401  (browser: a fixture, headless Chromium)

from sbert.serve.access import Policy  # noqa: E402
from sbert.serve.app import Access, create_app  # noqa: E402

pytestmark = pytest.mark.slow  # starts servers and a browser

FRONTEND = "http://localhost:3000"  # the one other origin the first server allows
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def server(model, index) -> Iterator[Server]:  # noqa: F811
    running = Server(create_app(model, model_name="default", index=index, access=Access(cors_origins=(FRONTEND,))))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def other_page() -> Iterator[str]:
    """A second origin on loopback: a plain page served from another port (the page any site could be)."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"<!doctype html><title>another site</title><p>another site</p>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    page = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Page)
    thread = threading.Thread(target=page.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{page.server_address[1]}"
    page.shutdown()
    thread.join(timeout=10)


def counts(server: Server, route: str) -> dict[str, float]:
    """Requests the server counted for ``route``, by status, from its /metrics."""
    found: dict[str, float] = {}
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line.startswith(f'sbert_requests_total{{endpoint="{route}",'):
            status = line.split('status="')[1].split('"')[0]
            found[status] = found.get(status, 0) + float(line.rsplit(" ", 1)[1])
    return found


# -- Host ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "127.0.0.1.nip.io", "a:b:c"])
def test_a_host_header_naming_another_server_is_refused(server, host):
    """DNS rebinding: a page at evil.example whose name now points at 127.0.0.1 sends Host: evil.example."""
    response = httpx.post(server.url + "/v1/embeddings", json={"input": "x"}, headers={"Host": host})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "host_not_allowed" and "--allowed-host" in error["message"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST:{port}", "127.0.0.1:{port}", "[::1]:{port}"])
def test_loopback_names_are_accepted_on_a_loopback_server(server, host):
    response = httpx.get(server.url + "/info", headers={"Host": host.format(port=server.port)})
    assert response.status_code == 200, response.text


def test_host_rules_for_each_bind_address():
    wildcard = Policy.of(Access(host="0.0.0.0"))
    assert wildcard.host_allowed(b"10.1.2.3:8080") and wildcard.host_allowed(b"[fe80::1]:80")
    assert wildcard.host_allowed(b"localhost:8080") and not wildcard.host_allowed(b"evil.example:8080")
    lan = Policy.of(Access(host="192.168.1.5", allowed_hosts=("search.internal",)))
    assert lan.host_allowed(b"192.168.1.5:8080") and lan.host_allowed(b"search.internal")
    assert not lan.host_allowed(b"10.1.2.3") and not lan.host_allowed(b"localhost")
    assert Policy.of(Access(allowed_hosts=("*",))).host_allowed(b"anything.example")
    assert not Policy.of(Access()).host_allowed(b"10.1.2.3")  # a loopback server is not reached by a LAN address


# -- Content-Type --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None]
)
def test_bodies_are_taken_only_as_json(server, content_type):
    """The content types a page may send without a CORS preflight are refused, as is a body with none."""
    headers = {"Content-Type": content_type} if content_type else {}
    response = httpx.post(server.url + "/v1/embeddings", content=b'{"input": "x"}', headers=headers)
    assert response.status_code == 415
    error = response.json()["error"]
    assert error["code"] == "unsupported_media_type" and "application/json" in error["message"]
    fine = httpx.post(
        server.url + "/v1/embeddings",
        content=b'{"input": "x"}',
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
    )
    assert fine.status_code == 200


# -- Origin and CORS -----------------------------------------------------------------------------------------
def test_another_origin_is_refused_and_the_pages_own_accepted(server):
    refused = httpx.post(server.url + "/v1/embeddings", json={"input": "x"}, headers={"Origin": "http://evil.example"})
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "origin_not_allowed" and "--cors-origin" in error["message"]
    assert "access-control-allow-origin" not in refused.headers
    own = httpx.post(server.url + "/v1/embeddings", json={"input": "x"}, headers={"Origin": server.url})
    assert own.status_code == 200 and "access-control-allow-origin" not in own.headers
    assert httpx.get(server.url + "/info", headers={"Origin": "null"}).status_code == 403


def test_an_allowed_origin_gets_cors_headers_and_its_preflight(server):
    preflight = httpx.options(
        server.url + "/v1/embeddings",
        headers={
            "Origin": FRONTEND,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == FRONTEND
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert {"authorization", "content-type"} <= {
        h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")
    }
    answer = httpx.post(server.url + "/v1/embeddings", json={"input": "x"}, headers={"Origin": FRONTEND})
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == FRONTEND
    assert "Origin" in answer.headers["vary"]
    other = httpx.options(
        server.url + "/v1/embeddings",
        headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"},
    )
    assert other.status_code == 403 and "access-control-allow-origin" not in other.headers


def test_the_page_is_sent_with_its_security_headers(server):
    page = httpx.get(server.url + "/")
    assert page.status_code == 200
    csp = page.headers["content-security-policy"]
    for directive in ("default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"):
        assert directive in csp
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["x-content-type-options"] == "nosniff"
    assert httpx.get(server.url + "/static/app.js").headers["x-content-type-options"] == "nosniff"
    assert httpx.get(server.url + "/health").headers["x-content-type-options"] == "nosniff"


# -- in a real browser ---------------------------------------------------------------------------------------
FETCH = """
const [url, body, type, done] = arguments;
const headers = type ? {"Content-Type": type} : {};
fetch(url, {method: "POST", headers, body})
  .then((r) => r.text().then((text) => done({status: r.status, text})))
  .catch((err) => done({error: String(err)}));
"""


def page_posts(browser, page: str, url: str, body: str, content_type: str | None) -> dict:  # noqa: F811
    """What a script on ``page`` (another origin) gets when it POSTs ``body`` to ``url`` with fetch."""
    if not browser.current_url.startswith(page):
        browser.get(page + "/")
    browser.set_script_timeout(60)
    return browser.execute_async_script(FETCH, url, body, content_type)


def test_a_page_on_another_origin_is_refused_in_chromium(browser, server, other_page):  # noqa: F811
    """The attack of the issue: a page elsewhere posts text/plain (no preflight) to the keyless server. The
    server must refuse it (403), not just leave the answer unreadable."""
    before = {route: counts(server, route) for route in ("/v1/embeddings", "/search")}
    attempts = [
        ("/v1/embeddings", '{"input": "read by another site"}', "text/plain"),
        ("/search", '{"query": "bread", "k": 4}', "text/plain"),
        ("/search", '{"query": "bread", "k": 4}', None),  # a string body: Chromium sends text/plain;charset=UTF-8
        ("/v1/embeddings", '{"input": "x"}', "application/json"),  # preflighted: the preflight is refused
    ]
    for path, body, content_type in attempts:
        got = page_posts(browser, other_page, server.url + path, body, content_type)
        assert "error" in got, got  # the page learns nothing
    for route in ("/v1/embeddings", "/search"):
        after = counts(server, route)
        assert after.get("200", 0) == before[route].get("200", 0), (route, after)  # nothing was served
        assert after.get("403", 0) > before[route].get("403", 0), (route, after)  # it was refused


def test_a_page_on_an_allowed_origin_can_call_the_service_in_chromium(browser, model, other_page):  # noqa: F811
    running = Server(create_app(model, model_name="default", access=Access(cors_origins=(other_page,))))
    try:
        got = page_posts(browser, other_page, running.url + "/v1/embeddings", '{"input": "hello"}', "application/json")
        assert got.get("status") == 200, got
        assert '"embedding"' in got["text"]
        plain = page_posts(browser, other_page, running.url + "/v1/embeddings", '{"input": "hello"}', "text/plain")
        assert plain.get("status") == 415, plain  # still JSON only, and the page may read why
    finally:
        running.stop()
