"""The web face refuses requests without the token, from a foreign Origin or for a foreign Host
(DNS rebinding) — page, static files, /rpc, /api/secrets, the secret page and the websocket
handshake — against ``mcp-setup serve`` running as a real subprocess."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.browser.serve import Served, raw_handshake, serving
from tests.helpers.timeouts import scaled

CANARY = "canary-" + uuid.uuid4().hex
EVIL = "http://evil.example"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("web-sec"), CANARY) as s:
        yield s


def rpc_body() -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "servers.list", "params": {}}


def open_prompt(served: Served) -> str:
    result = served.rpc("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your stub key"})["result"]
    assert result["status"] == "pending" and result["ref"].startswith("secret://")
    return result["prompt_id"]


def test_the_page_opens_with_the_token_and_sets_a_strict_httponly_cookie(served: Served) -> None:
    with served.client() as http:
        page = http.get("/", params={"t": served.token})
        assert page.status_code == 200 and "Add MCP server" in page.text
        cookie = page.headers["set-cookie"]
        assert cookie.startswith(f"mcp_setup_{served.port}={served.token};")
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict") and "Path=/" in cookie
        assert page.headers["content-security-policy"] == (
            "default-src 'self'; script-src 'self'; style-src 'self'; "
            f"connect-src 'self' ws://127.0.0.1:{served.port} ws://localhost:{served.port}; img-src 'self' data:; "
            "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
        )
        assert page.headers["x-frame-options"] == "DENY"
        assert page.headers["referrer-policy"] == "no-referrer"
        # The cookie now opens the page, the assets and (with our Origin) the API.
        assert http.get("/").status_code == 200
        assert http.get("/static/app.js").status_code == 200
        assert http.get("/static/app.css").status_code == 200
        ok = http.post("/rpc", json=rpc_body(), headers={"Origin": served.origin})
        assert ok.status_code == 200 and ok.json()["result"] == {"ok": True, "servers": []}
    assert "<script>" not in page.text and " style=" not in page.text  # nothing inline (CSP)


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/static/app.css", "/nope"])
def test_pages_and_assets_without_the_token_are_refused(served: Served, path: str) -> None:
    with served.client() as http:
        assert http.get(path).status_code == 403
        assert http.get(path, params={"t": "wrong-" + served.token}).status_code == 403
        assert http.get(path, cookies={f"mcp_setup_{served.port}": "wrong"}).status_code == 403
        if path != "/":  # the query token opens only the page itself
            assert http.get(path, params={"t": served.token}).status_code == 403


def test_the_refusal_page_says_what_to_do_in_plain_words(served: Served) -> None:
    with served.client() as http:
        page = http.get("/")
    assert page.status_code == 403 and "link printed by mcp-setup" in page.text


def test_rpc_without_the_token_or_from_a_foreign_origin_is_refused(served: Served) -> None:
    with served.client() as http:
        assert http.post("/rpc", json=rpc_body()).status_code == 403
        assert http.post("/rpc", json=rpc_body(), headers={"X-MCP-Setup-Token": "nope"}).status_code == 403
        assert http.post("/rpc", params={"t": served.token}, json=rpc_body()).status_code == 403
        foreign = http.post("/rpc", json=rpc_body(), headers={"X-MCP-Setup-Token": served.token, "Origin": EVIL})
        assert foreign.status_code == 403
        null = http.post("/rpc", json=rpc_body(), headers={"X-MCP-Setup-Token": served.token, "Origin": "null"})
        assert null.status_code == 403
        # A programmatic client with the header and no Origin is fine.
        assert http.post("/rpc", json=rpc_body(), headers={"X-MCP-Setup-Token": served.token}).status_code == 200


def test_a_cookie_alone_does_not_authorize_a_post_without_our_origin(served: Served) -> None:
    cookies = {f"mcp_setup_{served.port}": served.token}
    with served.client(cookies=cookies) as http:
        assert http.post("/rpc", json=rpc_body()).status_code == 403  # no Origin: not our page
        assert http.post("/rpc", json=rpc_body(), headers={"Origin": EVIL}).status_code == 403
        assert http.post("/rpc", json=rpc_body(), headers={"Origin": served.origin}).status_code == 200


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:{port}", "127.0.0.1:1", "localhost", "127.0.0.1", "0.0.0.0:{port}", "[::1]:{port}"],
)
def test_a_foreign_host_header_is_refused_even_with_the_token(served: Served, host: str) -> None:
    host = host.format(port=served.port)
    with served.client() as http:
        page = http.get("/", params={"t": served.token}, headers={"Host": host})
        assert page.status_code == 421
        assert "set-cookie" not in page.headers
        api = http.post("/rpc", json=rpc_body(), headers={"Host": host, **served.headers()})
        assert api.status_code == 421
        secret_page = http.get("/secrets/" + "x" * 32, params={"t": served.token}, headers={"Host": host})
        assert secret_page.status_code == 421
    assert raw_handshake(served.port, host=host, headers=served.headers()) == 403


def test_localhost_with_the_port_is_accepted(served: Served) -> None:
    with served.client() as http:
        page = http.get("/", params={"t": served.token}, headers={"Host": f"localhost:{served.port}"})
        assert page.status_code == 200
        origin = f"http://localhost:{served.port}"
        ok = http.post(
            "/rpc",
            json=rpc_body(),
            headers={"Host": f"localhost:{served.port}", "Origin": origin, "X-MCP-Setup-Token": served.token},
        )
        assert ok.status_code == 200


def test_the_websocket_handshake_needs_the_token_our_origin_and_our_host(served: Served) -> None:
    host = f"127.0.0.1:{served.port}"
    token = {"X-MCP-Setup-Token": served.token}
    origin = {"Origin": served.origin}
    assert raw_handshake(served.port, host=host, headers=origin) == 403  # no token
    assert raw_handshake(served.port, host=host, headers={**origin, "X-MCP-Setup-Token": "nope"}) == 403
    assert raw_handshake(served.port, host=host, headers={**origin, "Cookie": f"mcp_setup_{served.port}=nope"}) == 403
    assert raw_handshake(served.port, host=host, headers=token) == 403  # no Origin
    assert raw_handshake(served.port, host=host, headers={**token, "Origin": EVIL}) == 403
    assert raw_handshake(served.port, host=host, path=f"/ws?t={served.token}", headers=origin) == 403
    assert raw_handshake(served.port, host=host, headers={**token, **origin}) == 101
    assert (
        raw_handshake(served.port, host=host, headers={**origin, "Cookie": f"mcp_setup_{served.port}={served.token}"})
        == 101
    )


def test_the_secret_endpoint_needs_the_token_and_our_origin(served: Served) -> None:
    prompt_id = open_prompt(served)
    with served.client() as http:
        url = f"/api/secrets/{prompt_id}"
        assert http.post(url, json={"value": CANARY}).status_code == 403
        assert (
            http.post(
                url, json={"value": CANARY}, headers={"X-MCP-Setup-Token": served.token, "Origin": EVIL}
            ).status_code
            == 403
        )
        cookie = {"Cookie": f"mcp_setup_{served.port}={served.token}"}
        assert http.post(url, json={"value": CANARY}, headers=cookie).status_code == 403  # cookie without Origin
        # Still open: none of those answered it.
        answered = http.post(url, json={"value": CANARY}, headers=served.headers())
        assert answered.status_code == 200 and answered.json() == {"ok": True, "status": "answered"}
        assert CANARY not in answered.text


def test_each_secret_prompt_accepts_one_answer(served: Served) -> None:
    prompt_id = open_prompt(served)
    with served.client() as http:
        url = f"/api/secrets/{prompt_id}"
        empty = http.post(url, json={"value": "   "}, headers=served.headers())
        assert empty.status_code == 400 and empty.json()["error"]["code"] == "invalid_input"
        first = http.post(url, json={"value": CANARY}, headers=served.headers())
        assert first.status_code == 200
        second = http.post(url, json={"value": "other-" + CANARY}, headers=served.headers())
        assert second.status_code == 409 and second.json()["error"]["code"] == "prompt_answered"
        cancel = http.post(url, json={"cancel": True}, headers=served.headers())
        assert cancel.status_code == 409
        unknown = http.post("/api/secrets/" + "x" * 32, json={"value": CANARY}, headers=served.headers())
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "prompt_not_found"
        for response in (empty, first, second, cancel, unknown):
            assert CANARY not in response.text


@pytest.mark.parametrize(("kind", "unknown_code"), [("secrets", "prompt_not_found"), ("consents", "consent_not_found")])
def test_both_answer_endpoints_take_only_a_small_json_object(served: Served, kind: str, unknown_code: str) -> None:
    url = f"/api/{kind}/" + "x" * 32
    json_type = {**served.headers(), "Content-Type": "application/json"}
    with served.client() as http:
        not_json = http.post(
            url, content=b"value=" + CANARY.encode(), headers={**served.headers(), "Content-Type": "text/plain"}
        )
        assert not_json.status_code == 415 and not_json.json()["error"]["code"] == "invalid_input"
        too_long = http.post(url, content=b'{"value": "' + b"a" * (65 * 1024) + b'"}', headers=json_type)
        assert too_long.status_code == 413 and too_long.json()["error"]["code"] == "invalid_input"
        for body in (b"[1]", b"{not json", ('"' + CANARY + '"').encode()):
            refused = http.post(url, content=body, headers=json_type)
            assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_input"
            assert CANARY not in refused.text
        unknown = http.post(url, json={"deny": True, "cancel": True}, headers=served.headers())
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == unknown_code


def test_a_cancelled_prompt_cannot_be_answered_afterwards(served: Served) -> None:
    prompt_id = open_prompt(served)
    with served.client() as http:
        url = f"/api/secrets/{prompt_id}"
        assert http.post(url, json={"cancel": True}, headers=served.headers()).json() == {
            "ok": True,
            "status": "cancelled",
        }
        late = http.post(url, json={"value": CANARY}, headers=served.headers())
        assert late.status_code == 410 and late.json()["error"]["code"] == "prompt_cancelled"


def test_the_one_time_secret_page_opens_with_its_own_key_and_not_with_the_page_token(served: Served) -> None:
    result = served.rpc("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your stub key"})["result"]
    prompt_id, url = result["prompt_id"], result["url"]
    assert served.token not in url  # the link a client gets holds no credential of the user's
    with served.client() as http:
        assert http.get(f"/secrets/{prompt_id}").status_code == 403
        assert http.get(f"/secrets/{prompt_id}", params={"t": served.token}).status_code == 403
        page = http.get(url.split(str(served.port), 1)[1])
        assert page.status_code == 200 and "STUB_API_KEY" in page.text


def test_a_request_with_no_host_header_is_refused(served: Served) -> None:
    import socket

    with socket.create_connection(("127.0.0.1", served.port), timeout=scaled(10)) as sock:
        sock.sendall(f"GET /?t={served.token} HTTP/1.0\r\n\r\n".encode())
        status = sock.recv(100).split(b"\r\n", 1)[0]
    assert b" 421 " in status + b" "


def test_other_http_clients_cannot_read_the_api_cross_origin(served: Served) -> None:
    # No CORS: a preflight from a foreign origin gets no allow headers.
    with httpx.Client(trust_env=False, timeout=scaled(10)) as http:
        pre = http.options(
            f"{served.base}/rpc",
            headers={
                "Origin": EVIL,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-mcp-setup-token",
            },
        )
    assert pre.status_code == 403
    assert "access-control-allow-origin" not in pre.headers
