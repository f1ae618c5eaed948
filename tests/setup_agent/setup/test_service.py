"""The tools through SetupService, wired by build_runtime over a local catalog and real stubs."""

from __future__ import annotations

import asyncio
import json
import logging
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from app.runtime import Runtime
from app.settings import Settings
from setup_agent.setup.service import CallContext
from tests.helpers.processes import processes_mentioning
from tests.helpers.timeouts import scaled
from tests.stub_server.bundle import SERVER_PY, build_stub_bundle, sha256_hex, stub_manifest, stub_server_json

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def add_to_catalog(catalog: Path, name: str, bundle: Path, sha: str) -> None:
    catalog.mkdir(parents=True, exist_ok=True)
    doc = stub_server_json(bundle.resolve().as_uri(), sha, name=name)
    (catalog / (name.replace("/", "_") + ".json")).write_text(json.dumps(doc))


def bundle_with_command(dest: Path, command: str) -> tuple[Path, str]:
    manifest = stub_manifest(expected_value=None)
    manifest["server"]["mcp_config"]["command"] = command
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{command}.mcpb"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.write(SERVER_PY, "server/server.py")
    return path, sha256_hex(path.read_bytes())


@pytest.fixture
async def world(new_runtime, tmp_path: Path, canary: str, memory_keyring) -> AsyncIterator[tuple[Runtime, Clock]]:
    catalog = tmp_path / "catalog"
    dist = tmp_path / "dist"
    for mode in ("", "hang", "crash"):
        bundle, sha = build_stub_bundle(
            dist / (mode or "ok"), expected_value=canary, mode=mode, name=f"stub-{mode or 'ok'}"
        )
        add_to_catalog(catalog, f"io.test/stub-{mode or 'ok'}", bundle, sha)
    bundle, sha = bundle_with_command(dist / "missing", "no-such-runtime-xyz")
    add_to_catalog(catalog, "io.test/missing-command", bundle, sha)
    # The hanging server times out while the others install: the bound grows with a busy machine.
    settings = Settings(
        home=tmp_path / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=scaled(3)
    )
    clock = Clock()
    runtime = new_runtime(settings, keyring_backend=memory_keyring, refs_timer=clock)
    yield runtime, clock
    await runtime.aclose()


async def call(runtime: Runtime, tool: str, **args) -> dict:
    return await runtime.service.call(tool, args, CallContext(installed_by="agent"))


@pytest.mark.parametrize(
    ("server", "value", "code"),
    [
        ("io.test/stub-ok", "wrong-value", "rejected"),
        ("io.test/stub-hang", None, "timeout"),
        ("io.test/stub-crash", None, "exited"),
        ("io.test/missing-command", None, "command_not_found"),
    ],
)
async def test_a_failed_install_leaves_refs_usable_no_rows_no_files_and_no_process(
    world, canary: str, server: str, value: str | None, code: str
) -> None:
    runtime, _ = world
    ref = runtime.refs.mint("STUB_API_KEY", value or canary)
    with anyio.fail_after(scaled(3 + 2 + 5)):
        result = await call(
            runtime, "mcp_setup_install_and_connect", qualified_name=server, env_refs={"STUB_API_KEY": ref}
        )
    assert result["ok"] is False and result["error"]["code"] == code, result
    assert canary not in json.dumps(result)
    assert runtime.store.servers.list() == []
    assert runtime.refs.resolve({"STUB_API_KEY": ref})["STUB_API_KEY"].reveal() == (value or canary)
    install_root = runtime.connections.install_root
    assert not install_root.exists() or not any(install_root.iterdir())
    await runtime.prober.drain()
    assert not processes_mentioning(str(runtime.settings.home))


async def test_a_secret_given_as_a_plain_env_value_is_refused(world, canary: str) -> None:
    runtime, _ = world
    result = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/stub-ok", env={"STUB_API_KEY": canary}
    )
    assert result["error"]["code"] == "secret_not_allowed"
    assert canary not in json.dumps(result)


async def test_a_missing_secret_is_named_with_how_to_get_it(world) -> None:
    runtime, _ = world
    result = await call(runtime, "mcp_setup_test_connection", qualified_name="io.test/stub-ok")
    assert result["error"]["code"] == "invalid_input"
    assert "STUB_API_KEY" in result["error"]["message"] and "mcp_setup_request_secret" in result["error"]["message"]


async def test_an_unknown_setting_is_refused_listing_the_real_ones(world, canary: str) -> None:
    runtime, _ = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    result = await call(
        runtime,
        "mcp_setup_test_connection",
        qualified_name="io.test/stub-ok",
        env_refs={"STUB_API_KEY": ref},
        env={"REGION": "eu"},
    )
    assert result["error"]["code"] == "invalid_input"
    # the real settings are listed; the unknown name is the agent's own text, never echoed (#10 item 2)
    assert "REGION" not in result["error"]["message"] and "STUB_API_KEY" in result["error"]["message"]


async def test_a_ref_minted_for_another_key_is_refused(world, canary: str) -> None:
    runtime, _ = world
    ref = runtime.refs.mint("OTHER_KEY", canary)
    result = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/stub-ok", env_refs={"STUB_API_KEY": ref}
    )
    assert result["error"]["code"] == "secret_wrong_key"


async def test_an_expired_ref_is_refused_with_an_injected_clock(world, canary: str) -> None:
    runtime, clock = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    clock.now += runtime.settings.secret_ttl_seconds + 1
    result = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/stub-ok", env_refs={"STUB_API_KEY": ref}
    )
    assert result["error"]["code"] == "secret_expired"


async def test_test_connection_succeeds_and_installs_nothing(world, canary: str) -> None:
    runtime, _ = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    result = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/stub-ok", env_refs={"STUB_API_KEY": ref}
    )
    assert result["ok"] is True and {t["name"] for t in result["tools"]} == {"echo", "whoami"}
    assert runtime.store.servers.list() == []
    assert runtime.refs.is_ready(ref)


async def test_the_test_the_install_and_get_say_how_many_tools_a_server_adds_and_about_how_many_tokens(
    world, canary
) -> None:
    runtime, _ = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    tested = await call(
        runtime, "mcp_setup_test_connection", qualified_name="io.test/stub-ok", env_refs={"STUB_API_KEY": ref}
    )
    assert tested["context"]["tool_count"] == 2 and 40 < tested["context"]["estimated_tokens"] < 400, tested["context"]
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    installed = await call(
        runtime, "mcp_setup_install_and_connect", qualified_name="io.test/stub-ok", env_refs={"STUB_API_KEY": ref}
    )
    got = await call(runtime, "mcp_setup_get", qualified_name="io.test/stub-ok")
    assert installed["context"]["tool_count"] == got["context"]["tool_count"] == 2
    assert got["context"]["estimated_tokens"] == installed["context"]["estimated_tokens"] > 0
    runtime.store.pins.set_hidden_tools(got["server_id"], ["whoami"], actor="user:terminal")
    less = await call(runtime, "mcp_setup_get", qualified_name="io.test/stub-ok")
    assert less["context"]["tool_count"] == 1 and less["context"]["left_out_by_user"] == 1


async def test_tool_calls_are_logged_with_key_names_only(world, canary: str, caplog: pytest.LogCaptureFixture) -> None:
    runtime, _ = world
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    with caplog.at_level(logging.DEBUG):
        await call(
            runtime, "mcp_setup_install_and_connect", qualified_name="io.test/stub-ok", env_refs={"STUB_API_KEY": ref}
        )
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "env_refs keys=['STUB_API_KEY']" in text
    assert canary not in text and ref not in text


async def test_bad_arguments_are_invalid_input_not_crashes(world) -> None:
    runtime, _ = world
    for tool, args in [
        ("mcp_setup_search", {"page": 0}),
        ("mcp_setup_search", {"page_size": "ten"}),
        ("mcp_setup_get", {}),
        ("mcp_setup_test_connection", {"qualified_name": "io.test/stub-ok", "env_refs": ["x"]}),
        ("mcp_setup_remove", {"server_id": 5}),
        ("mcp_setup_request_secret", {"key_name": "bad name!", "prompt": "x"}),
    ]:
        result = await call(runtime, tool, **args)
        assert result["ok"] is False and result["error"]["code"] == "invalid_input", (tool, result)


async def test_an_unknown_server_is_not_found(world) -> None:
    runtime, _ = world
    result = await call(runtime, "mcp_setup_get", qualified_name="io.test/nope")
    assert result["error"]["code"] == "not_found"
    result = await call(runtime, "mcp_setup_remove", server_id="srv_nope")
    assert result["error"]["code"] == "not_found"


async def test_progress_reports_each_stage_of_an_install_and_the_failing_one(world, canary: str) -> None:
    runtime, _ = world
    events: list[dict] = []

    async def hear(event: dict) -> None:
        events.append(event)

    ctx = CallContext(installed_by="ui", on_progress=hear)
    wrong = runtime.refs.mint("STUB_API_KEY", "wrong-" + canary[::-1])
    await runtime.service.call(
        "mcp_setup_test_connection", {"qualified_name": "io.test/stub-ok", "env_refs": {"STUB_API_KEY": wrong}}, ctx
    )
    assert [(e["stage"], e["status"]) for e in events][-1] == ("handshake", "failed")
    assert events[-1]["code"] == "rejected"
    events.clear()
    ref = runtime.refs.mint("STUB_API_KEY", canary)
    result = await runtime.service.call(
        "mcp_setup_install_and_connect", {"qualified_name": "io.test/stub-ok", "env_refs": {"STUB_API_KEY": ref}}, ctx
    )
    assert result["status"] == "connected"
    # The server's stderr lines while it starts (#12 item 4) come between "starting" and "handshake".
    lines = [i for i, e in enumerate(events) if e["status"] == "output"]
    assert lines and all(events[i]["stage"] == "starting" and events[i]["stderr_line"] for i in lines)
    assert [e["stage"] for e in events].index("starting") < lines[0]
    assert lines[-1] < [e["stage"] for e in events].index("handshake")
    assert next(e for e in events if e["stage"] == "starting")["deadline_seconds"] > 0
    events = [e for e in events if e["status"] != "output"]
    assert [(e["stage"], e["status"]) for e in events] == [
        ("resolving", "started"),
        ("resolving", "done"),
        ("downloading", "started"),
        ("downloading", "done"),
        ("starting", "started"),
        ("handshake", "done"),
        ("tools_listed", "done"),
        ("installing", "started"),
        ("installing", "done"),
        ("connected", "done"),
    ]
    assert all(e["server"] == "io.test/stub-ok" for e in events)
    assert canary not in json.dumps(events)


async def test_a_hanging_install_holds_up_no_other_install(world, canary: str) -> None:
    runtime, _ = world
    ref_hang = runtime.refs.mint("STUB_API_KEY", canary)
    ref_ok = runtime.refs.mint("STUB_API_KEY", canary)
    hanging = asyncio.create_task(
        call(
            runtime,
            "mcp_setup_install_and_connect",
            qualified_name="io.test/stub-hang",
            env_refs={"STUB_API_KEY": ref_hang},
        )
    )
    ok = asyncio.create_task(
        call(
            runtime,
            "mcp_setup_install_and_connect",
            qualified_name="io.test/stub-ok",
            env_refs={"STUB_API_KEY": ref_ok},
        )
    )
    with anyio.fail_after(scaled(20)):
        done, _ = await asyncio.wait({hanging, ok}, return_when=asyncio.FIRST_COMPLETED)
        assert done == {ok}
        assert (await ok)["status"] == "connected"
        assert (await hanging)["error"]["code"] == "timeout"


async def test_every_tool_in_the_specs_has_a_handler_and_no_handler_lacks_a_spec(world) -> None:
    runtime, _ = world
    from setup_agent.setup.tool_specs import TOOL_NAMES

    assert set(runtime.service._handlers()) == set(TOOL_NAMES)
