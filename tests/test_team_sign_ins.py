"""OAuth sign-ins of a team's replicas (#28): a sign-in started on replica A sends the browser to
``<public host>/oauth/callback``; the balancer may hand that redirect to replica B, which redeems
the code itself (A stored the PKCE verifier and the client, encrypted, with the sign-in's row) and
fills the shared ref; A, if still there, ends without a second exchange, and a sign-in whose A
shut down meanwhile is finished all the same. Two runtimes over one PostgreSQL play the replicas;
B's answer goes through its real web guard (``create_app``). The code, the PKCE verifier, the
client secret and the tokens are in no table, log line or answer. On SQLite a sign-in keeps its
loopback listener."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import mcp.client.auth.oauth2 as sdk_oauth
import pytest
from sqlalchemy import text

from app.runtime import Runtime, build_runtime
from app.settings import Settings
from app.web.app import create_app
from setup_agent.oauth.shared_exchange import finish_exchange
from setup_agent.secrets.refs import SecretRefStore
from setup_agent.secrets.vault import Vault
from setup_agent.setup.service import CallContext
from setup_agent.store import SharedSignIns
from setup_agent.store.database import Store
from tests.fakes.oauth_server import OAuthPair, remote_server_json, serve_oauth_pair
from tests.oauth_runtime import NAME
from tests.test_team_shared_state import every_cell
from tests.timeouts import scaled

pytestmark = pytest.mark.anyio

PUBLIC = "team.example"
PORT = 8443


@pytest.fixture
def pair() -> Iterator[OAuthPair]:
    with serve_oauth_pair() as p:
        yield p


@pytest.fixture
def verifiers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every PKCE verifier the SDK makes (for the canary)."""
    made: list[str] = []
    original = sdk_oauth.PKCEParameters.generate

    def generate() -> Any:
        params = original()
        made.append(params.code_verifier)
        return params

    monkeypatch.setattr(sdk_oauth.PKCEParameters, "generate", staticmethod(generate))
    return made


def settings_for(root: Path, pair: OAuthPair, database_url: str | None, key: Path | None) -> Settings:
    catalog = root / "catalog"
    catalog.mkdir(parents=True)
    (catalog / "notes.json").write_text(json.dumps(remote_server_json(NAME, pair.mcp_url)))
    extra: dict[str, Any] = (
        {"database_url": database_url, "data_key_file": key, "public_host": PUBLIC} if database_url else {}
    )
    return Settings(
        home=root / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=scaled(20), **extra
    )


class Replicas:
    def __init__(self, a: Runtime, b: Runtime, b_web: Any, settings: Settings) -> None:
        self.a, self.b, self.b_web, self.settings = a, b, b_web, settings
        self.answers: list[str] = []

    async def deliver_to_b(self, location: str) -> httpx.Response:
        """The balancer hands the browser's redirect to replica B (its web guard, Host = the public host)."""
        target = urlsplit(location)
        assert target.netloc == f"{PUBLIC}:{PORT}"  # the redirect leads to the team's address, not to A's loopback
        transport = httpx.ASGITransport(app=self.b_web)
        async with httpx.AsyncClient(transport=transport, base_url=f"http://{PUBLIC}:{PORT}") as http:
            answer = await http.get(f"{target.path}?{target.query}")
        self.answers.append(answer.text + json.dumps(dict(answer.headers)))
        return answer


@pytest.fixture
async def replicas(tmp_path: Path, pair: OAuthPair, postgres_url: str, memory_keyring: Any) -> AsyncIterator[Replicas]:
    key = tmp_path / "team.key"
    Vault.in_memory().export_key(key)
    made = []
    for name in ("a", "b"):
        settings = settings_for(tmp_path / name, pair, postgres_url, key)
        rt = build_runtime(settings, keyring_backend=memory_keyring)
        rt.sign_ins.timeout = scaled(20)
        if rt.feed is not None:
            rt.feed.start()  # A is woken by B's NOTIFY
        made.append((rt, settings))
    (a, settings), (b, settings_b) = made
    a.sign_ins.serve_callbacks_at(f"http://{PUBLIC}:{PORT}")  # what serve's WebFace sets from MCP_SETUP_PUBLIC_HOST
    b_web = create_app(settings_b, token="t" * 32, port=PORT, runtime_factory=lambda: b, public_hosts=[PUBLIC])
    b_web.face.runtime = b  # the callback needs only B's runtime (its lifespan is not run here)
    try:
        yield Replicas(a, b, b_web, settings)
    finally:
        for rt, _ in made:
            await rt.aclose()


async def authorize_page(location_of: asyncio.Future[str], url: str) -> None:
    """The user's browser up to the redirect: open the link, press Authorize; the redirect's address."""
    async with httpx.AsyncClient(timeout=scaled(20)) as http:
        page = await http.get(url, follow_redirects=True)
        tx = re.search(r'name=tx value="([^"]+)"', page.text)
        assert tx, page.text
        sent = await http.post(str(page.url), data={"tx": tx.group(1)})
        location_of.set_result(sent.headers["location"])


def ctx_showing(location_of: asyncio.Future[str], shown: list[dict[str, Any]], replicas: Replicas) -> CallContext:
    async def present(info: dict[str, Any]) -> dict[str, Any]:
        shown.append(info)
        await authorize_page(location_of, info["url"])
        # the browser follows the redirect, which the balancer hands to B
        asyncio.get_running_loop().create_task(replicas.deliver_to_b(location_of.result()))
        return {"status": "shown"}

    return CallContext(installed_by="agent", present_authorization=present)


def client_secrets(pair: OAuthPair) -> list[str]:
    return [c.client_secret for c in pair.provider.clients.values() if c.client_secret]


async def test_a_sign_in_started_on_one_replica_completes_when_its_redirect_reaches_another_and_the_install_works(
    replicas: Replicas, pair: OAuthPair, verifiers: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    pair.provider.confidential = True  # a client secret, for the canary
    location: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    shown: list[dict[str, Any]] = []
    out = await replicas.a.service.call(
        "mcp_setup_authorize", {"qualified_name": NAME}, ctx_showing(location, shown, replicas)
    )
    assert out["status"] == "authorized", out  # A finished the exchange with the code B received
    (info,) = shown
    assert parse_qs(urlsplit(info["url"]).query)["redirect_uri"] == [f"http://{PUBLIC}:{PORT}/oauth/callback"]
    assert "Signed in" in replicas.answers[0] and "X-MCP-Setup-Replica".lower() in replicas.answers[0].lower()
    replay = await replicas.deliver_to_b(location.result())  # the same redirect again
    assert replay.status_code == 400 and "Refused" in replay.text
    installed = await replicas.b.service.call(
        "mcp_setup_install_and_connect",
        {"qualified_name": NAME, "oauth_ref": out["ref"]},
        CallContext(installed_by="agent"),
    )
    assert installed["status"] == "connected", installed  # the ref made on A installs on B
    result = await replicas.b.connections.call_tool(installed["server_id"], "whoami")
    assert result["content"][0]["text"] == "ok"
    code = parse_qs(urlsplit(location.result()).query)["code"][0]
    state = parse_qs(urlsplit(location.result()).query)["state"][0]
    assert [f["grant_type"] for f in pair.provider.token_forms] == ["authorization_code"]  # once, by B: A did not
    planted = [
        code,
        state,
        *verifiers,
        *pair.provider.issued_access,
        *pair.provider.issued_refresh,
        *client_secrets(pair),
    ]
    assert len(verifiers) == 1 and pair.provider.issued_access and client_secrets(pair)
    assert pair.provider.token_forms[0]["code_verifier"] == verifiers[0]
    cells = every_cell(replicas.a.store)
    ours = [
        r for r in caplog.records if r.name != "httpx" and not r.name.startswith("httpcore.")
    ]  # not the test's browser
    outbound = json.dumps([out, installed, shown[0]["scopes"]]) + "\n".join(r.getMessage() for r in ours)
    for value in planted:
        assert value not in cells  # only hashed (state) or encrypted (code, grant)
        assert value not in outbound
        assert all(value not in answer for answer in replicas.answers)  # B's pages: no code, verifier or token


async def test_a_callback_for_no_sign_in_in_progress_or_addressed_elsewhere_is_refused(replicas: Replicas) -> None:
    forged = await replicas.deliver_to_b(f"http://{PUBLIC}:{PORT}/oauth/callback?code=x&state=nobody-asked")
    assert forged.status_code == 400 and "does not belong" in forged.text
    transport = httpx.ASGITransport(app=replicas.b_web)
    async with httpx.AsyncClient(transport=transport, base_url="http://rebound.example:8443") as http:
        foreign = await http.get("/oauth/callback?code=x&state=y")
    assert foreign.status_code in (400, 421) and "Signed in" not in foreign.text


def test_a_sign_in_row_takes_one_answer_once_and_none_after_its_deadline(postgres_url: str, canary: str) -> None:
    vault = Vault.in_memory()
    now = [datetime(2026, 12, 2, tzinfo=UTC)]
    with Store(postgres_url, vault) as store:
        rows = SharedSignIns(store, vault, clock=lambda: now[0])
        rows.open("state-1", owner="a:1", ttl_seconds=60)
        assert rows.take("state-1") is None  # nothing arrived yet
        assert rows.answer("state-1", {"code": canary, "iss": None}) is True
        assert rows.answer("state-1", {"code": "forged", "iss": None}) is False  # the first answer wins
        assert canary not in every_cell(store) and "state-1" not in every_cell(store)
        assert rows.take("state-1") == {"code": canary, "iss": None}
        assert rows.take("state-1") is None  # once
        assert rows.answer("state-1", {"code": canary, "iss": None}) is False  # a replay after it was taken
        rows.open("state-2", owner="a:1", ttl_seconds=60)
        now[0] += timedelta(seconds=61)
        assert rows.answer("state-2", {"code": canary, "iss": None}) is False  # expired
        rows.open("state-3", owner="a:1", ttl_seconds=60)  # any replica's next sign-in sweeps expired rows
        assert every_cell(store).count("a:1") == 1


async def test_on_sqlite_a_sign_in_keeps_its_loopback_listener(
    tmp_path: Path, pair: OAuthPair, memory_keyring: Any
) -> None:
    rt = build_runtime(settings_for(tmp_path, pair, None, None), keyring_backend=memory_keyring)
    try:
        assert rt.sign_ins.shared is None

        async def later(info: dict[str, Any]) -> dict[str, Any]:
            return {"status": "pending"}

        out = await rt.service.call(
            "mcp_setup_authorize", {"qualified_name": NAME}, CallContext(present_authorization=later)
        )
        assert parse_qs(urlsplit(out["url"]).query)["redirect_uri"][0].startswith("http://127.0.0.1:")
    finally:
        await rt.aclose()


async def test_a_sign_in_declined_at_the_other_replica_ends_the_waiting_one_as_declined(replicas: Replicas) -> None:
    async def decline(info: dict[str, Any]) -> dict[str, Any]:
        state = parse_qs(urlsplit(info["url"]).query)["state"][0]
        answer = await replicas.deliver_to_b(f"http://{PUBLIC}:{PORT}/oauth/callback?error=access_denied&state={state}")
        assert answer.status_code == 200 and "declined" in answer.text
        return {"status": "shown"}

    out = await replicas.a.service.call(
        "mcp_setup_authorize", {"qualified_name": NAME}, CallContext(present_authorization=decline)
    )
    assert (
        out["ok"] is False and out["error"]["code"] == "oauth_denied" and "access_denied" in out["error"]["message"]
    ), out


async def test_a_sign_in_whose_replica_shut_down_before_the_redirect_is_finished_by_the_replica_it_reaches(
    replicas: Replicas, pair: OAuthPair, verifiers: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    pair.provider.confidential = True
    location: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def later(info: dict[str, Any]) -> dict[str, Any]:
        await authorize_page(location, info["url"])  # the user pressed Authorize; the redirect is on its way
        return {"status": "pending"}

    out = await replicas.a.service.call(
        "mcp_setup_authorize", {"qualified_name": NAME}, CallContext(present_authorization=later)
    )
    assert out["status"] == "pending", out
    await replicas.a.sign_ins.aclose()  # A shuts down: its flow is cancelled, the sign-in's row and ref stay
    back = await replicas.deliver_to_b(location.result())
    assert back.status_code == 200 and "Signed in" in back.text, back.text
    assert [f["grant_type"] for f in pair.provider.token_forms] == ["authorization_code"]
    args = {"qualified_name": NAME, "oauth_ref": out["ref"]}
    tested = await replicas.b.service.call("mcp_setup_test_connection", args, CallContext(installed_by="agent"))
    assert {t["name"] for t in tested["tools"]} == {"echo", "whoami"}, tested
    installed = await replicas.b.service.call("mcp_setup_install_and_connect", args, CallContext(installed_by="agent"))
    assert installed["status"] == "connected", installed
    result = await replicas.b.connections.call_tool(installed["server_id"], "whoami")
    assert result["content"][0]["text"] == "ok"
    assert (await replicas.deliver_to_b(location.result())).status_code == 400  # a replay finds nothing to redeem
    planted = [
        *verifiers,
        *pair.provider.issued_access,
        *pair.provider.issued_refresh,
        *client_secrets(pair),
        parse_qs(urlsplit(location.result()).query)["code"][0],
    ]
    assert len(verifiers) == 1 and client_secrets(pair)
    cells = every_cell(replicas.b.store)
    logged = "\n".join(
        r.getMessage() for r in caplog.records if r.name != "httpx" and not r.name.startswith("httpcore.")
    )
    outbound = json.dumps([out, tested, installed]) + logged + "".join(replicas.answers)
    for value in planted:
        assert value not in cells and value not in outbound


async def test_a_sign_in_cancelled_on_its_replica_is_redeemed_on_none(replicas: Replicas, pair: OAuthPair) -> None:
    """A 2026-07-28 client declined it, or the person did not finish in time (app/mcp/mrtr.py)."""
    location: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def later(info: dict[str, Any]) -> dict[str, Any]:
        await authorize_page(location, info["url"])  # the person pressed Authorize after all
        return {"status": "pending"}

    out = await replicas.a.service.call(
        "mcp_setup_authorize", {"qualified_name": NAME}, CallContext(present_authorization=later)
    )
    await replicas.a.sign_ins.cancel(out["ref"])  # not handed over as at a shutdown: its row goes
    back = await replicas.deliver_to_b(location.result())
    assert back.status_code == 400 and pair.provider.token_forms == [], back.text
    args = {"qualified_name": NAME, "oauth_ref": out["ref"]}
    tested = await replicas.b.service.call("mcp_setup_test_connection", args, CallContext(installed_by="agent"))
    assert tested["error"]["code"] in ("secret_missing", "secret_expired"), tested


def test_a_sign_in_exchange_is_claimed_once_taken_only_when_finished_and_cleared_then(
    postgres_url: str, canary: str
) -> None:
    vault = Vault.in_memory()
    with Store(postgres_url, vault) as store:
        rows = SharedSignIns(store, vault)
        rows.open("state-1", owner="a:1", ttl_seconds=60, exchange={"verifier": canary})
        assert canary not in every_cell(store)  # encrypted with the data key
        assert (
            rows.answer("state-1", {"code": "c", "iss": None}) is False
        )  # a row with an exchange is redeemed, not answered
        assert rows.claim("state-1") == {"verifier": canary}
        assert rows.claim("state-1") is None  # a replayed redirect finds nothing to redeem
        assert rows.answer("state-1", {"code": "c", "iss": None}) is False
        assert rows.take("state-1") is None  # still being exchanged
        rows.finish("state-1", {"done": True})
        with store.database.engine.connect() as conn:
            assert conn.execute(text("SELECT exchange_encrypted FROM mcp_sign_ins")).scalar_one() is None  # cleared
        assert rows.take("state-1") == {"done": True}
        assert rows.take("state-1") is None


def test_the_replica_receiving_the_redirect_sends_the_code_nowhere_but_the_issuers_token_endpoint(canary: str) -> None:
    refs = SecretRefStore()
    ref = refs.reserve("OAUTH_X")
    outcomes: list[dict[str, Any]] = []

    class Rows:
        def finish(self, state: str, outcome: dict[str, Any]) -> None:
            outcomes.append(outcome)

    record = {
        "verifier": canary,
        "token_endpoint": "https://elsewhere.example/token",
        "issuer": "https://as.example",
        "iss_expected": "https://as.example",
        "iss_required": False,
        "redirect_uri": "https://team.example/oauth/callback",
        "client_id": "c",
        "client_secret": None,
        "token_endpoint_auth_method": "none",
        "resource": "https://mcp.example/mcp",
        "send_resource": True,
        "scope": None,
        "revocation_endpoint": None,
        "server_url": "https://mcp.example/mcp",
        "ref": ref,
        "key": "OAUTH_X",
    }
    status, _, page = finish_exchange(
        Rows(), refs, "s", record, {"code": canary, "iss": None}, protect=lambda g: None, timeout=1, clock=time.time
    )
    assert status == 502 and "another host" in page and canary not in page
    assert "another host" in outcomes[0]["failed"]  # the waiting replica is told why
    assert len(refs) == 0  # the ref is gone: the agent is told to sign in again, not to wait
    status, _, page = finish_exchange(
        Rows(),
        refs,
        "s",
        {**record, "token_endpoint": "https://as.example/token"},
        {"code": canary, "iss": "https://evil.example"},
        protect=lambda g: None,
        timeout=1,
        clock=time.time,
    )
    assert status == 502 and "another authorization server" in page  # RFC 9207: the response's iss
