"""Issue #10, items 1, 2 and 7 through SetupService: a prompted value is secret for life, no
agent-supplied text is echoed back through the redactor, and a ref serves one install."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from app.runtime import Runtime, build_runtime
from app.settings import Settings
from setup_agent.setup.service import CallContext
from tests.stub_server.bundle import build_stub_bundle, stub_manifest, stub_server_json
from tests.timeouts import scaled

pytestmark = pytest.mark.anyio

PLAIN = "io.test/plain-key-echo"  # the registry calls its key non-secret; the server echoes it
PLAIN_KEY = "STUB_WORKSPACE"  # a name that does not look secret either
SHORT = "§Zq"  # a three-character secret: not replaced in outbound text, refused everywhere else


def _catalog_entry(
    catalog: Path, name: str, bundle: Path, sha: str, *, secret: bool = True, key_name: str = "STUB_API_KEY"
) -> None:
    doc = stub_server_json(bundle.resolve().as_uri(), sha, name=name, key_name=key_name)
    for var in doc["packages"][0]["environmentVariables"]:
        var["isSecret"] = secret
    (catalog / (name.replace("/", "_") + ".json")).write_text(json.dumps(doc))


def _plain_bundle(dest: Path) -> tuple[Path, str]:
    """The stub in echo_env mode, its key not ``sensitive``: a registry that says "not secret"."""
    import zipfile

    from tests.stub_server.bundle import SERVER_PY, sha256_hex

    manifest = stub_manifest(key_name=PLAIN_KEY, expected_value=None, mode="echo_env", name="plain")
    manifest["user_config"][PLAIN_KEY]["sensitive"] = False
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "plain.mcpb"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.write(SERVER_PY, "server/server.py")
    return path, sha256_hex(path.read_bytes())


@pytest.fixture
async def runtime(tmp_path: Path, canary: str, memory_keyring) -> AsyncIterator[Runtime]:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    for name in ("io.test/stub-a", "io.test/stub-b"):
        bundle, sha = build_stub_bundle(tmp_path / "dist" / name.split("/")[1], expected_value=canary)
        _catalog_entry(catalog, name, bundle, sha)
    bundle, sha = build_stub_bundle(tmp_path / "dist" / "short", expected_value=SHORT)
    _catalog_entry(catalog, "io.test/stub-short", bundle, sha)
    bundle, sha = _plain_bundle(tmp_path / "dist" / "plain")
    _catalog_entry(catalog, PLAIN, bundle, sha, secret=False, key_name=PLAIN_KEY)
    settings = Settings(
        home=tmp_path / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=scaled(5)
    )
    rt = build_runtime(settings, keyring_backend=memory_keyring)
    yield rt
    await rt.aclose()


async def call(rt: Runtime, tool: str, ctx: CallContext | None = None, **args: Any) -> dict:
    return await rt.service.call(tool, args, ctx or CallContext(installed_by="agent"))


def _prompted_ref(rt: Runtime, key: str, value: str, prompt: str = "Paste your GitHub token") -> str:
    pending = rt.broker.open(key, prompt, None)
    return rt.broker.answer(pending.prompt_id, value)


# -- item 1 --------------------------------------------------------------------------------


async def test_a_prompted_value_for_a_key_the_registry_calls_plain_is_never_shown(rt_canary_env) -> None:
    rt, canary = rt_canary_env
    events: list[dict] = []

    async def on_progress(event: dict) -> None:
        events.append(event)

    ref = _prompted_ref(rt, PLAIN_KEY, canary)
    with anyio.fail_after(scaled(30)):
        installed = await call(
            rt,
            "mcp_setup_install_and_connect",
            CallContext(on_progress=on_progress),
            qualified_name=PLAIN,
            env_refs={PLAIN_KEY: ref},
        )
    assert installed.get("status") == "connected", installed
    assert any(t["name"] == "leak" for t in installed["tools"])
    assert canary not in json.dumps(installed)
    assert canary not in json.dumps(events)
    server = rt.store.servers.get(installed["server_id"])
    assert server is not None and [(k.key, k.secret) for k in server.env_keys] == [(PLAIN_KEY, True)]
    with anyio.fail_after(scaled(30)):
        listed = await call(rt, "mcp_setup_list_servers", wait_seconds=10)
        assert canary not in json.dumps(listed)
        await rt.connections.connect(server)  # registered again at every connect
        listed = await call(rt, "mcp_setup_list_servers", wait_seconds=10)
    assert listed["servers"][0]["status"] == "connected"
    assert canary not in json.dumps(listed)


@pytest.fixture
def rt_canary_env(runtime: Runtime, canary: str) -> tuple[Runtime, str]:
    return runtime, canary


# -- item 2 --------------------------------------------------------------------------------

PINS = [f"{n:04d}" for n in range(10_000)]


async def _answers(rt: Runtime, guess: str) -> list[dict]:
    """The agent's guessing calls: every place a name it gives could come back."""
    ref = rt.refs.mint("STUB_API_KEY", "not-the-pin-" + "x" * 8)
    return [
        await call(rt, "mcp_setup_get", qualified_name=" ".join(PINS)),
        await call(rt, "mcp_setup_get", qualified_name=guess),
        await call(rt, "mcp_setup_get", qualified_name=f"io.test/{guess}"),
        await call(rt, "mcp_setup_get", qualified_name="io.test/stub-a", source=guess),
        await call(rt, "mcp_setup_search", query=guess, source=guess),
        await call(rt, "mcp_setup_remove", server_id=guess),
        await call(rt, "mcp_setup_remove", server_id=f"srv_{guess}"),
        await call(rt, "mcp_setup_request_secret", key_name="K", prompt="p", server=" ".join(PINS[:300])),
        await call(
            rt,
            "mcp_setup_test_connection",
            qualified_name="io.test/stub-a",
            package=guess,
            env_refs={"STUB_API_KEY": ref},
        ),
        await call(
            rt,
            "mcp_setup_test_connection",
            qualified_name="io.test/stub-a",
            env_refs={"STUB_API_KEY": ref},
            env={guess: "x", " ".join(PINS[:300]): "y"},
        ),
    ]


def _scrub_ids(answers: list[dict]) -> str:
    text = json.dumps(answers, sort_keys=True)
    import re

    return re.sub(r"secret://[0-9a-f]{32}|\"prompt_id\": \"[^\"]+\"", "ID", text)


async def test_a_right_guess_costs_a_refusal_and_the_second_locks_every_later_answer(runtime: Runtime) -> None:
    # #10 made a right guess answer like a wrong one; #24 (items 1-2) refuses it instead, at
    # the input, tells the user at once and locks the principal at the second: every later
    # answer is the same whatever it guesses, so 10,000 PINs cost two refusals, not an answer.
    pin = "4821"
    wrong = await _answers(runtime, pin)
    assert all(
        a.get("ok") is not False or a["error"]["code"] not in ("arguments_refused", "session_locked") for a in wrong
    )
    runtime.refs.mint("PIN", pin)  # now the user's PIN is a live secret
    right = await _answers(runtime, pin)
    codes = [a["error"]["code"] for a in right]
    # the first is over the size bound (#24 item 1): refused unread, whatever it holds
    assert codes == ["invalid_input"] + ["arguments_refused"] * 2 + ["session_locked"] * (len(right) - 3), codes
    assert "secret://" not in json.dumps(right) and pin not in json.dumps(right)
    again = await _answers(runtime, "1234")
    assert _scrub_ids(again) == _scrub_ids(right[3:4] * len(again))
    assert runtime.guard is not None and runtime.guard.locked() == ["agent"]


async def test_names_the_agent_gives_are_echoed_only_when_valid(runtime: Runtime) -> None:
    long_name = "a" * 5000
    answer = await call(runtime, "mcp_setup_get", qualified_name=long_name)
    assert answer["error"]["code"] == "invalid_input" and long_name[:250] not in json.dumps(answer)
    answer = await call(runtime, "mcp_setup_get", qualified_name="io.test/not-there")
    assert answer["error"]["code"] == "not_found"
    answer = await call(runtime, "mcp_setup_remove", server_id="drop table; --")
    assert answer["error"]["code"] == "invalid_input" and "drop" not in json.dumps(answer)
    ref = runtime.refs.mint("STUB_API_KEY", "x" * 12)
    answer = await call(
        runtime,
        "mcp_setup_test_connection",
        qualified_name="io.test/stub-a",
        env_refs={"STUB_API_KEY": ref},
        env={"REGION": "eu", "no way!": "x"},
    )
    message = answer["error"]["message"]
    assert "2 names" in message and "STUB_API_KEY" in message and "REGION" not in message and "no way" not in message


# -- item 7 --------------------------------------------------------------------------------


async def test_two_concurrent_installs_cannot_use_one_ref(runtime: Runtime, canary: str) -> None:
    ref = _prompted_ref(runtime, "STUB_API_KEY", canary)
    a_resolving = asyncio.Event()
    b_done = asyncio.Event()

    async def hold_a(event: dict) -> None:
        if event["stage"] == "resolving" and event["status"] == "started":
            a_resolving.set()
        if event["stage"] == "installing" and event["status"] == "started":
            await b_done.wait()

    with anyio.fail_after(scaled(60)):
        a = asyncio.create_task(
            call(
                runtime,
                "mcp_setup_install_and_connect",
                CallContext(on_progress=hold_a),
                qualified_name="io.test/stub-a",
                env_refs={"STUB_API_KEY": ref},
            )
        )
        await a_resolving.wait()
        b = await call(
            runtime, "mcp_setup_install_and_connect", qualified_name="io.test/stub-b", env_refs={"STUB_API_KEY": ref}
        )
        b_done.set()
        a_result = await a
    assert b["ok"] is False and b["error"]["code"] == "secret_in_use", b
    assert a_result.get("status") == "connected", a_result
    assert [s.qualified_name for s in runtime.store.servers.list()] == ["io.test/stub-a"]


async def test_a_failed_install_releases_its_refs_for_the_next_one(runtime: Runtime, canary: str) -> None:
    ref = _prompted_ref(runtime, "STUB_API_KEY", canary)
    with anyio.fail_after(scaled(60)):
        failed = await call(
            runtime,
            "mcp_setup_install_and_connect",
            qualified_name="io.test/stub-a",
            env_refs={"STUB_API_KEY": ref},
            env={"REGION": "eu"},
        )
        assert failed["error"]["code"] == "invalid_input"
        ok = await call(
            runtime, "mcp_setup_install_and_connect", qualified_name="io.test/stub-b", env_refs={"STUB_API_KEY": ref}
        )
    assert ok.get("status") == "connected", ok


# -- item 8: short values, byte-exactly --------------------------------------------------------


async def test_a_short_secret_reaches_no_argv_log_or_database_byte(
    runtime: Runtime, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from setup_agent.secrets.redact import install_log_redaction

    install_log_redaction(runtime.redactor, caplog.handler)
    caplog.set_level(logging.DEBUG)
    ref = _prompted_ref(runtime, "STUB_API_KEY", SHORT)
    with anyio.fail_after(scaled(30)):
        installed = await call(
            runtime,
            "mcp_setup_install_and_connect",
            qualified_name="io.test/stub-short",
            env_refs={"STUB_API_KEY": ref},
        )
    assert installed.get("status") == "connected", installed
    pid = runtime.connections.pid(installed["server_id"])
    assert pid is not None
    needle = SHORT.encode()
    assert needle not in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert needle in Path(f"/proc/{pid}/environ").read_bytes()  # it did reach the server, by env
    logging.getLogger("test.short").warning("the user typed %s", SHORT)
    assert needle not in caplog.text.encode()
    data = runtime.settings.home
    for path in data.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), path


def test_a_short_secret_in_the_launch_spec_is_refused_from_disk(tmp_path: Path, memory_keyring) -> None:
    from setup_agent.errors import InvalidInput
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    store = Store.for_data_dir(tmp_path, Vault.open(tmp_path, keyring_backend=memory_keyring))
    fields = {
        "qualified_name": "io.test/x",
        "source": "local",
        "version": "1",
        "package_type": "stdio",
        "installed_by": "agent",
        "tools_hash": "h",
    }
    try:
        with pytest.raises(InvalidInput):
            store.servers.install(
                **fields, launch_spec={"command": "run", "args": ["--pin", "4821"]}, env={"PIN": ("4821", True)}
            )
        # a token that merely contains it is not the value
        store.servers.install(
            **fields, launch_spec={"command": "run", "args": ["--port=14821x"]}, env={"PIN": ("4821", True)}
        )
    finally:
        store.close()
