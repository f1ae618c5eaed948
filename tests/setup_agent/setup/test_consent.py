"""Consent before a test or install: the user, out of band, approves what runs and where secrets go.

Service-level tests over build_runtime (consent "ask"), a local catalog, the real stub bundle
and a real streamable-HTTP stub; the user's answers go to the ConsentBroker as a face's would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.runtime import Runtime
from app.settings import Settings
from registry_clients.models import RequiredKey
from setup_agent.errors import InvalidInput
from setup_agent.launch.spec import LaunchSpec
from setup_agent.setup.consent import ConsentBroker, ConsentWarning, build_consent_request
from setup_agent.setup.service import CallContext
from tests.helpers.consent import JIRA, Listener, jira_entry
from tests.helpers.processes import processes_mentioning
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import build_stub_bundle, stub_server_json
from tests.stub_server.http_server import serve_http_stub, sha256_hex

pytestmark = pytest.mark.anyio

STUB = "io.test/stub"


@pytest.fixture
async def world(new_runtime, tmp_path: Path, canary: str, memory_keyring) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=canary)
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha, name=STUB)))
    (catalog / "jira.json").write_text(json.dumps(jira_entry()))
    settings = Settings(
        home=tmp_path / "data", registries="local", catalog_dir=catalog, consent="ask", probe_timeout_seconds=scaled(20)
    )
    runtime = new_runtime(settings, keyring_backend=memory_keyring)
    yield runtime
    await runtime.aclose()


async def call(runtime: Runtime, tool: str, ctx: CallContext | None = None, **args: Any) -> dict:
    with anyio.fail_after(scaled(30)):
        return await runtime.service.call(tool, args, ctx or CallContext(installed_by="agent"))


async def test_a_test_or_install_without_consent_returns_consent_required_and_runs_nothing(world, canary: str) -> None:
    runtime = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    events: list[dict] = []
    runtime.consents.subscribe(events.append)
    for tool in ("mcp_setup_test_connection", "mcp_setup_install_and_connect"):
        result = await call(runtime, tool, qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
        assert result["ok"] is False and result["error"]["code"] == "consent_required", result
        assert "prompt_id" not in result["error"]["details"] and "url" not in result["error"]["details"]
        assert "mcp-setup approve" in result["error"]["message"]  # where the user approves, nothing to use
        (pending,) = runtime.consents.pending()
        assert pending.consent_id not in json.dumps(result)
        assert runtime.consents.get(pending.consent_id).request.server == STUB
        assert canary not in json.dumps(result)
    assert [e["type"] for e in events] == ["consent_request"]  # the same launch: one open request, not two
    assert runtime.store.servers.list() == []
    assert not processes_mentioning(str(runtime.settings.home))
    assert runtime.refs.is_ready(ref)  # nothing consumed


async def test_the_consent_shows_runner_package_sha_and_templates_never_values(world, canary: str) -> None:
    runtime = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    await call(runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
    consent = runtime.consents.pending()[-1].request
    shown = consent.public()
    assert shown["package_type"] == "mcpb" and shown["sha256"] and shown["version"] == "1.0.0"
    assert shown["command_line"][0] == "python3" and any("${__dirname}" in a for a in shown["command_line"])
    assert shown["env"]["STUB_API_KEY"] == "${STUB_API_KEY}"
    assert [s["key"] for s in shown["secrets"]] == ["STUB_API_KEY"]
    assert "this computer" in shown["secrets"][0]["destination"]
    assert canary not in json.dumps(shown)


async def test_the_install_after_an_approved_test_asks_nothing_more_and_a_tool_left_out_later_is_held_back(
    world, canary: str
) -> None:
    """One approval per install: the test's covers it, with every tool the test listed; the
    person leaves one out afterwards (the card's box, ``mcp-setup disable --tool``)."""
    runtime = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    first = await call(runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
    assert first["error"]["code"] == "consent_required" and runtime.consents.pending()[-1].request.tools == []
    assert runtime.consents.pending()[-1].request.covers_install is True
    runtime.consents.approve(runtime.consents.pending()[-1].consent_id)
    events: list[dict] = []
    runtime.consents.subscribe(events.append)
    tested = await call(runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
    assert tested.get("ok") is True and events == [], tested  # the same test is not asked again
    args = {
        "qualified_name": STUB,
        "env_refs": {"STUB_API_KEY": ref},
        "hidden_tools": ["whoami"],
    }  # an agent's: ignored
    installed = await call(runtime, "mcp_setup_install_and_connect", **args)
    assert installed["status"] == "connected", installed
    assert events == [] and runtime.consents.pending() == []  # never asked again
    assert [t["name"] for t in installed["tools"]] == ["echo", "whoami"] and "left_out_by_user" not in installed
    server = runtime.store.servers.get_by_name(STUB)
    assert server is not None
    runtime.store.pins.set_hidden_tools(server.server_id, ["whoami"], actor="user:web")
    assert [e.event for e in runtime.store.audit.entries(server_id=server.server_id)] == ["installed", "tools_hidden"]
    got = await call(runtime, "mcp_setup_get", qualified_name=STUB)
    assert got["left_out_by_user"] == ["whoami"] and got["context"]["tool_count"] == 1
    (listed,) = (await call(runtime, "mcp_setup_list_servers"))["servers"]
    assert listed["tools"] == ["echo"] and listed["left_out_by_user"] == ["whoami"]
    assert canary not in json.dumps([first, tested, installed, got, listed])
    with anyio.fail_after(scaled(30)):
        await runtime.gateway.start()
        assert {t.name for t in runtime.gateway.catalog.tools()} == {"stub__echo"}
        refused = await runtime.gateway.call("stub__whoami", {})
    assert refused["structuredContent"]["error"]["code"] == "tool_left_out", refused
    assert "mcp-setup enable stub --tool whoami" in refused["content"][0]["text"]


async def test_an_agent_cannot_leave_out_tools_only_the_users_answer_can(world, canary: str) -> None:
    """Canary: hidden_tools in an agent's install arguments changes nothing; the user kept them all."""
    runtime = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    args = {
        "qualified_name": STUB,
        "env_refs": {"STUB_API_KEY": ref},
        "hidden_tools": ["echo"],
        "settings": {"hidden_tools": ["echo"]},
        "decision": {"hidden_tools": ["echo"]},
    }
    await call(runtime, "mcp_setup_test_connection", **args)
    runtime.consents.approve(runtime.consents.pending()[-1].consent_id)
    assert (await call(runtime, "mcp_setup_test_connection", **args))["ok"] is True
    pending = runtime.consents.pending()  # nothing: the test's approval covers the install
    installed = await call(runtime, "mcp_setup_install_and_connect", **args)
    assert pending == []
    assert installed["status"] == "connected" and "left_out_by_user" not in installed, installed
    assert {t["name"] for t in installed["tools"]} == {"echo", "whoami"}
    server = runtime.store.servers.get_by_name(STUB)
    offers = runtime.store.pins.offers().get(server.server_id) if server is not None else None
    assert server is not None and (offers is None or not offers.hidden_tools)
    assert canary not in json.dumps(installed)


async def test_after_a_remove_the_same_server_is_asked_again(world, canary: str) -> None:
    """#25 item 8: an approval is not remembered across a Remove."""
    runtime = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    await call(runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
    runtime.consents.approve(runtime.consents.pending()[-1].consent_id)
    installed = await call(
        runtime, "mcp_setup_install_and_connect", qualified_name=STUB, env_refs={"STUB_API_KEY": ref}
    )
    assert installed["status"] == "connected", installed
    removed = await call(runtime, "mcp_setup_remove", server_id=installed["server_id"])
    assert removed.get("removed") is True, removed
    again = runtime.refs.mint("STUB_API_KEY", canary)
    asked = await call(runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": again})
    assert asked["error"]["code"] == "consent_required", asked


async def test_never_ask_skips_the_consent_step(new_runtime, tmp_path: Path, canary: str, memory_keyring) -> None:
    bundle, sha = build_stub_bundle(tmp_path / "dist", expected_value=canary)
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha, name=STUB)))
    settings = Settings(home=tmp_path / "data", registries="local", catalog_dir=catalog, consent="never-ask")
    runtime = new_runtime(settings, keyring_backend=memory_keyring)
    try:
        ref = runtime.refs.mint("STUB_API_KEY", canary)
        result = await call(runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
        assert result.get("ok") is True, result
    finally:
        await runtime.aclose()


def test_consent_is_asked_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_SETUP_CONSENT")
    assert Settings().consent == "ask"
    monkeypatch.setenv("MCP_SETUP_CONSENT", "never-ask")
    assert Settings().consent == "never-ask"


async def test_a_denied_consent_is_consent_denied(world, canary: str) -> None:
    runtime = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)

    async def deny(pending):
        runtime.consents.deny(pending.consent_id)
        return {}

    result = await call(
        runtime,
        "mcp_setup_test_connection",
        CallContext(present_consent=deny),
        qualified_name=STUB,
        env_refs={"STUB_API_KEY": ref},
    )
    assert result["error"]["code"] == "consent_denied"


async def test_the_agent_chosen_jira_host_is_only_shown_and_the_users_edit_is_used(
    world, canary: str, caplog: pytest.LogCaptureFixture
) -> None:
    runtime = world
    caplog.set_level(logging.DEBUG)
    ref = runtime.refs.mint("JIRA_TOKEN", canary)
    frames: list[dict] = []
    runtime.consents.subscribe(frames.append)
    with serve_http_stub(expected_sha256=sha256_hex(f"Bearer {canary}")) as real_url:
        real_host = real_url.split("/")[2]
        async with Listener() as evil:
            args = {"qualified_name": JIRA, "env_refs": {"JIRA_TOKEN": ref}, "env": {"jira_host": evil.host}}
            first = await call(runtime, "mcp_setup_test_connection", **args)
            assert first["error"]["code"] == "consent_required", first
            pending = runtime.consents.pending()[-1]
            shown = pending.request.public()
            assert [(d["name"], d["suggested"]) for d in shown["destinations"]] == [("jira_host", evil.host)]
            assert shown["secrets"][0]["key"] == "JIRA_TOKEN" and shown["secrets"][0]["host"] == evil.host
            assert shown["headers"] == {"Authorization": "Bearer ${JIRA_TOKEN}"}
            runtime.consents.approve(pending.consent_id, {"jira_host": real_host})

            tested = await call(runtime, "mcp_setup_test_connection", **args)
            assert tested.get("ok") is True, tested
            # One approval per install: the test's covers it, and the user's host stands, not the agent's.
            installed = await call(runtime, "mcp_setup_install_and_connect", **args)
            assert installed["status"] == "connected", installed
            assert runtime.consents.pending() == []
            server = runtime.store.servers.get_by_name(JIRA)
            assert (
                server is not None
                and runtime.store.values.env_values(server.server_id)["jira_host"].reveal() == real_host
            )
            assert evil.connections == 0 and canary.encode() not in evil.received
            assert runtime.store.servers.get_by_name(JIRA) is not None
            listed = await call(runtime, "mcp_setup_list_servers")
            for text in (
                json.dumps(first),
                json.dumps(shown),
                json.dumps(frames),
                json.dumps(tested),
                json.dumps(installed),
                json.dumps(listed),
                caplog.text,
            ):
                assert canary not in text


async def test_a_destination_edit_is_validated_and_only_shown_settings_can_change(world, canary: str) -> None:
    runtime = world
    ref = runtime.refs.mint("JIRA_TOKEN", canary)
    await call(
        runtime,
        "mcp_setup_test_connection",
        qualified_name=JIRA,
        env_refs={"JIRA_TOKEN": ref},
        env={"jira_host": "example.invalid"},
    )
    cid = runtime.consents.pending()[-1].consent_id
    with pytest.raises(InvalidInput):
        runtime.consents.approve(cid, {"JIRA_TOKEN": "x"})
    with pytest.raises(InvalidInput):
        runtime.consents.approve(cid, {"jira_host": "  "})
    assert runtime.consents.status(cid) == "pending"


def _spec_with_argv_secret() -> tuple[LaunchSpec, list[RequiredKey]]:
    spec = LaunchSpec(
        command="node",
        args=["server.js", "--token=${TOKEN}"],
        runner="node",
        package_type="mcpb",
        identifier="file:///b.mcpb",
        version="1.0.0",
        file_sha256="ab" * 32,
    )
    return spec, [RequiredKey(name="TOKEN", secret=True, kind="argument")]


def test_warnings_are_shown_and_must_be_accepted_explicitly() -> None:
    spec, keys = _spec_with_argv_secret()
    warning = ConsentWarning("argv_secret", "TOKEN is on the command line, where other users can see it (ps).")
    request = build_consent_request(server="s", version="1.0.0", spec=spec, keys=keys, values={}, warnings=[warning])
    assert request.public()["warnings"] == [{"code": "argv_secret", "message": warning.message}]
    assert request.public()["command_line"] == ["node", "server.js", "--token=${TOKEN}"]
    assert request.secrets[0].how == ["command-line argument"]
    broker = ConsentBroker(ttl_seconds=60)
    pending = broker.open(request)
    with pytest.raises(InvalidInput):
        broker.approve(pending.consent_id)
    assert broker.decision(request) is None
    broker.approve(pending.consent_id, accept_warnings=True)
    assert broker.decision(request) is not None


def test_a_remembered_consent_lasts_the_ref_ttl_and_a_different_launch_asks_again() -> None:
    now = [0.0]
    broker = ConsentBroker(ttl_seconds=60, timer=lambda: now[0])
    spec, keys = _spec_with_argv_secret()
    request = build_consent_request(server="s", version="1.0.0", spec=spec, keys=keys, values={})
    broker.approve(broker.open(request).consent_id)
    other = build_consent_request(server="s", version="1.0.1", spec=spec, keys=keys, values={})
    assert broker.decision(request) is not None and broker.decision(other) is None
    now[0] = 61.0
    assert broker.decision(request) is None


async def test_a_link_a_face_returns_never_reaches_the_agent_in_consent_required(world, canary: str) -> None:
    runtime = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)

    async def link(pending):
        return {"url": f"http://127.0.0.1:1/consents/{pending.consent_id}?t=approval-key", "status": "pending"}

    result = await call(
        runtime,
        "mcp_setup_test_connection",
        CallContext(present_consent=link),
        qualified_name=STUB,
        env_refs={"STUB_API_KEY": ref},
    )
    assert result["error"]["code"] == "consent_required"
    assert result["error"]["details"] == {"status": "pending"}
    assert "approval-key" not in json.dumps(result) and runtime.consents.pending()[-1].consent_id not in json.dumps(
        result
    )


def test_host_and_url_settings_of_a_local_server_are_destinations_and_others_are_not() -> None:
    spec = LaunchSpec(
        command="npx",
        args=["-y", "jira-mcp@1.2.3"],
        runner="npx",
        package_type="npm",
        identifier="jira-mcp",
        version="1.2.3",
        env={"JIRA_URL": "${JIRA_URL}", "REGION": "${REGION}", "JIRA_TOKEN": "${JIRA_TOKEN}"},
    )
    keys = [RequiredKey(name="JIRA_URL"), RequiredKey(name="REGION"), RequiredKey(name="JIRA_TOKEN", secret=True)]
    request = build_consent_request(
        server="s", version="1.2.3", spec=spec, keys=keys, values={"JIRA_URL": "https://evil.example", "REGION": "eu"}
    )
    assert [(d.name, d.suggested) for d in request.destinations] == [("JIRA_URL", "https://evil.example")]
    assert request.command_line == ["npx", "-y", "jira-mcp@1.2.3"]
    assert "JIRA_URL" in request.secrets[0].destination  # the process may send it on there


async def test_a_clients_test_approval_covers_the_install_with_every_tool_and_comes_before_the_key(
    world, canary: str
) -> None:
    """A client's setup (``mcp-setup approve``, a page): one approval, given before the key is typed."""
    runtime = world
    ctx = CallContext(installed_by="mcp:claude-code")
    ref = runtime.refs.reserve("STUB_API_KEY")  # its prompt not answered yet
    args = {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": ref}}
    first = await call(runtime, "mcp_setup_test_connection", ctx, **args)
    assert first["error"]["code"] == "consent_required", first  # what runs is shown before the key
    (pending,) = runtime.consents.pending()
    doc = pending.request.public()["document"]
    assert doc["asked"] == f"Claude Code asked to install {STUB}." and "no second question" in doc["intro"]
    runtime.consents.approve(pending.consent_id, by="user:terminal")
    waiting = await call(runtime, "mcp_setup_test_connection", ctx, **args)
    assert waiting["error"]["code"] == "secret_pending", waiting  # approved; the key comes next
    runtime.refs.fulfil(ref, canary)
    events: list[dict] = []
    runtime.consents.subscribe(events.append)
    tested = await call(runtime, "mcp_setup_test_connection", ctx, **args)
    assert tested.get("ok") is True, tested
    installed = await call(runtime, "mcp_setup_install_and_connect", ctx, **args)
    assert installed["status"] == "connected", installed
    assert [t["name"] for t in installed["tools"]] == ["echo", "whoami"] and "left_out_by_user" not in installed
    assert events == [] and runtime.consents.pending() == []  # never asked again
    assert canary not in json.dumps([first, waiting, tested, installed, doc])


def test_a_non_secret_value_that_decides_access_is_shown_and_approved_with_the_launch() -> None:
    """#25 item 7: the directory a filesystem server may read is shown, not ${allowed_directory};
    another directory is another approval; the env vars are one row of the technical details."""
    from setup_agent.setup import consent_document

    spec = LaunchSpec(
        command="npx",
        args=["-y", "@modelcontextprotocol/server-filesystem@1.0.0", "${allowed_directory}"],
        runner="npx",
        package_type="npm",
        identifier="@modelcontextprotocol/server-filesystem",
        version="1.0.0",
        env={"LOG": "${LOG_LEVEL}", "TOKEN": "${API_TOKEN}"},
    )
    keys = [
        RequiredKey(name="allowed_directory"),
        RequiredKey(name="LOG_LEVEL"),
        RequiredKey(name="API_TOKEN", secret=True),
    ]
    mine = build_consent_request(
        server="fs",
        version="1.0.0",
        spec=spec,
        keys=keys,
        values={"allowed_directory": "/home/me/notes", "LOG_LEVEL": "info", "API_TOKEN": "x"},
    )
    assert mine.command_line[-1] == "/home/me/notes"
    assert mine.env == {"LOG": "info", "TOKEN": "${API_TOKEN}"}  # a secret stays a template
    other = build_consent_request(
        server="fs",
        version="1.0.0",
        spec=spec,
        keys=keys,
        values={"allowed_directory": "/", "LOG_LEVEL": "info", "API_TOKEN": "x"},
    )
    assert other.fingerprint != mine.fingerprint
    technical = consent_document(mine).section("technical")
    assert technical is not None
    rows = [line.text for line in technical.lines if line.label == "Environment"]
    assert rows == ["LOG=info\nTOKEN=<your API_TOKEN>"]


async def test_an_installs_consent_after_its_test_weighs_the_tested_tools_against_the_context_budget(
    world, canary: str
) -> None:
    from setup_agent.setup import FACE_TOKENS, budget_line

    runtime = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    await call(runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
    assert runtime.consents.pending()[-1].request.budget == {"budget": 8000, "listed": FACE_TOKENS}
    runtime.consents.approve(runtime.consents.pending()[-1].consent_id)
    await call(runtime, "mcp_setup_test_connection", qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
    runtime.consents.forget(STUB)  # the test's approval, which covers the install, expired: it asks anew
    await call(runtime, "mcp_setup_install_and_connect", qualified_name=STUB, env_refs={"STUB_API_KEY": ref})
    (pending,) = runtime.consents.pending()
    adds = sum(t["estimated_tokens"] for t in pending.request.tools)
    assert budget_line(pending.request) == (
        f"Its tools add about {adds:,} tokens to what your AI clients are listed: {FACE_TOKENS + adds:,} of your "
        "budget of 8,000 tokens."
    )
