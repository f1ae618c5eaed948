"""Every route of ``mcp-setup serve``, called with each principal's credential.

The table below is the one in docs/principals.md: who may open each route. A route of the app
that the table does not name fails the first test, so a new route cannot ship without a row.
State changes made for a person (turning a server on or off, approving a consent) are the
user's or an admin member's; a client token and a member token call tools and approve nothing.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.settings import Settings
from app.web.app import create_app
from tests.browser.serve import Served, make_catalog, start_serve, stop_serve
from tests.helpers.mcp_face import REPO, mcp_setup_argv
from tests.helpers.timeouts import scaled

CREDENTIALS = ("user", "client", "member", "admin", "none")
ALLOWED, REFUSED = "allowed", "refused"

#: (method, path) -> what each credential gets, in the order of CREDENTIALS.
TABLE: dict[tuple[str, str], tuple[str, ...]] = {
    ("GET", "/"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("GET", "/static/{name}"): (ALLOWED, ALLOWED, ALLOWED, ALLOWED, REFUSED),
    ("WS", "/ws"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc"): (ALLOWED, ALLOWED, ALLOWED, ALLOWED, REFUSED),
    ("POST", "/rpc servers.enable"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc servers.disable"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc servers.keep_running"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc servers.update"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc servers.rotate"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc clients.connect"): (ALLOWED, REFUSED, REFUSED, REFUSED, REFUSED),  # this computer's files
    ("POST", "/rpc servers.sampling"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc servers.network"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc servers.tool_shown"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc servers.try_tool"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/rpc tools_budget.set"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),  # the person's budget
    ("POST", "/api/secrets/{prompt_id}"): (ALLOWED, ALLOWED, ALLOWED, ALLOWED, REFUSED),
    ("POST", "/api/consents/{consent_id}"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/api/relayed/{request_id}"): (ALLOWED, REFUSED, REFUSED, ALLOWED, REFUSED),
    ("POST", "/mcp"): (REFUSED, ALLOWED, ALLOWED, ALLOWED, REFUSED),
    ("GET", "/mcp"): (REFUSED, ALLOWED, ALLOWED, ALLOWED, REFUSED),
    ("DELETE", "/mcp"): (REFUSED, ALLOWED, ALLOWED, ALLOWED, REFUSED),
}
#: Routes outside the guard's credentials: their own key (the one-time pages, a sign-in's state)
#: or nothing in them (a load balancer's probes). Not part of the app's own router.
OWN_KEY = ("/secrets/…", "/oauth/callback", "/healthz", "/readyz")
#: The parameters each state-changing method gets: enough to reach its principal check (an unknown
#: server past it is an error of its own, not a refusal).
RPC_PARAMS: dict[str, dict[str, Any]] = {
    "servers.list": {},
    "servers.enable": {"server_id": "srv_missing"},
    "servers.disable": {"server_id": "srv_missing"},
    "servers.update": {"server_id": "srv_missing"},
    "servers.rotate": {"server_id": "srv_missing", "key": "API_KEY"},
    "clients.connect": {"client": "cursor", "apply": False},  # a dry run: nothing is written
    "servers.keep_running": {"server_id": "srv_missing", "keep_running": True},
    "servers.sampling": {"server_id": "srv_missing", "sampling": "no"},
    "servers.network": {"server_id": "srv_missing", "only_tested": True},
    "servers.tool_shown": {"server_id": "srv_missing", "tool": "search", "shown": False},
    "servers.try_tool": {"name": "missing__tool", "arguments": {}},
    "tools_budget.set": {"tokens": 8000},
}


def test_the_table_names_every_route_of_the_app(tmp_path: Path) -> None:
    guard = create_app(Settings(home=tmp_path / "data"), token="t", port=1, runtime_factory=lambda: None)
    routes = set()
    for route in guard.app.routes:
        methods = getattr(route, "methods", None) or {"WS"}
        for method in methods - {"HEAD"}:
            routes.add((method, route.path))
    named = {(m, p.split(" ")[0]) for m, p in TABLE}
    assert routes == named, (routes - named, named - routes)  # no route left out, none the app lacks


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, dict[str, str]]]:
    root = tmp_path_factory.mktemp("routes")
    served = start_serve(root, make_catalog(root, "canary-routes-" + "x" * 16), MCP_SETUP_CONSENT="ask")

    def token(*args: str) -> str:
        done = subprocess.run(
            [*mcp_setup_argv(), "token", "create", *args],
            env=served.env,
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[0]

    tokens = {"client": token("cursor", "--client"), "member": token("alice"), "admin": token("boss", "--admin")}
    try:
        yield served, tokens
    finally:
        stop_serve(served)


def headers_for(who: str, served: Served, tokens: dict[str, str], *, browser: bool) -> dict[str, str]:
    if who == "user":
        return served.headers() if browser else {"Authorization": f"Bearer {served.token}"}
    if who == "none":
        return {"Origin": served.origin} if browser else {}
    return {"Authorization": f"Bearer {tokens[who]}", "Origin": served.origin}


def outcome(status: int) -> str:
    return REFUSED if status in (401, 403) else ALLOWED


def call(served: Served, who: str, tokens: dict[str, str], method: str, path: str) -> str:
    if method == "WS":
        from websockets.exceptions import InvalidStatus

        try:
            headers = headers_for(who, served, tokens, browser=True)
            headers.pop("Origin", None)
            if who != "user":
                headers["X-MCP-Setup-Token"] = ""
            served.websocket(**headers).close()
        except InvalidStatus as refused:  # the handshake answered with a status: the guard's
            return outcome(refused.response.status_code)
        return ALLOWED
    with httpx.Client(base_url=served.base, timeout=scaled(30), trust_env=False) as http:
        if path == "/":
            return outcome(http.get("/", headers=headers_for(who, served, tokens, browser=False)).status_code)
        if path == "/static/{name}":
            return outcome(
                http.get("/static/app.css", headers=headers_for(who, served, tokens, browser=True)).status_code
            )
        if path.startswith("/rpc"):
            rpc_method = path.split(" ")[1] if " " in path else "servers.list"
            body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": rpc_method, "params": RPC_PARAMS[rpc_method]}
            answer = http.post("/rpc", json=body, headers=headers_for(who, served, tokens, browser=True))
            if answer.status_code in (401, 403):
                return REFUSED
            return REFUSED if "tool_not_allowed" in answer.text else ALLOWED
        if path.startswith("/api/"):
            concrete = path.replace("{prompt_id}", "p" * 32).replace("{consent_id}", "c" * 32)
            concrete = concrete.replace("{request_id}", "r" * 32)
            answer = http.post(concrete, json={"approve": True}, headers=headers_for(who, served, tokens, browser=True))
            return outcome(answer.status_code)  # past the guard: 404 for an unknown id
        if path == "/mcp" and method != "POST":  # no session: the SDK answers 400 past the guard
            creds = headers_for(who, served, tokens, browser=False)
            answered = http.request(method, "/mcp", headers={"Accept": "text/event-stream", **creds})
            return outcome(answered.status_code)
        if path == "/mcp":
            body = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            }
            mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            creds = headers_for(who, served, tokens, browser=False)
            return outcome(http.post("/mcp", json=body, headers={**mcp, **creds}).status_code)
    raise AssertionError(path)


@pytest.mark.parametrize(("method", "path"), list(TABLE))
def test_each_route_answers_each_principal_as_the_table_says(
    served: tuple[Served, dict[str, str]], method: str, path: str
) -> None:
    server, tokens = served
    got = tuple(call(server, who, tokens, method, path) for who in CREDENTIALS)
    assert dict(zip(CREDENTIALS, got, strict=True)) == dict(zip(CREDENTIALS, TABLE[(method, path)], strict=True))


def test_the_docs_table_is_this_table() -> None:
    text = (REPO / "docs" / "principals.md").read_text()
    for (method, path), row in TABLE.items():
        line = f"| `{method} {path}` | " + " | ".join("yes" if c == ALLOWED else "no" for c in row) + " |"
        assert line in text, line
