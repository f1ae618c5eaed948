"""Tests of the stub MCP servers themselves, driven by the SDK's real clients and raw JSON-RPC."""

from __future__ import annotations

import ast
import hashlib
import json
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import PaginatedRequestParams

try:
    import tests.stub_server  # noqa: F401
except ModuleNotFoundError:  # repo root not on sys.path (no pytest `pythonpath` setting)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.helpers.paths import FIXTURES, STUB_DIR
from tests.helpers.timeouts import scaled
from tests.stub_server import bundle as stub_bundle
from tests.stub_server import http_server
from tests.stub_server.procs import INIT_PARAMS, PidFile, RawStub, alive, first_error

STUB_DIR = STUB_DIR
MODERN = STUB_DIR / "modern_server.py"
RIGHT = "right-value-7f3c9a1e5b2d4c6f8a0b"
WRONG = "wrong-value-0000000000000000"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def pid_file(tmp_path: Path):
    pf = PidFile(tmp_path / "pids")
    yield pf
    pf.cleanup()


@pytest.fixture
def errlog(tmp_path: Path):
    with open(tmp_path / "stderr.log", "w+") as f:
        yield f


def _read_err(f) -> str:
    f.flush()
    f.seek(0)
    return f.read()


def first_mcp_error(exc: BaseException) -> MCPError | None:
    return first_error(exc, MCPError)


def stub_params(pid_file: PidFile, **kw) -> StdioServerParameters:
    argv, env = stub_bundle.stub_command(pid_file=pid_file.path, **kw)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env)


async def connect_error(transport, mode: str = "legacy") -> MCPError:
    """Connect with mcp.Client, expect failure, return the MCPError."""
    with pytest.raises(BaseException) as info:
        with anyio.fail_after(scaled(15)):
            async with Client(transport, mode=mode):
                pass
    err = first_mcp_error(info.value)
    assert err is not None, repr(info.value)
    return err


# -- stdio stub via the SDK -------------------------------------------------------------


@pytest.mark.anyio
async def test_right_value_lists_and_calls_tools(pid_file, errlog):
    params = stub_params(pid_file, value=RIGHT, expected_value=RIGHT)
    with anyio.fail_after(scaled(10)):
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as session:
            init = await session.initialize()
            assert init.protocol_version == "2025-11-25"
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == ["echo", "whoami"]
            assert tools.tools[0].input_schema["required"] == ["text"]
            echo = await session.call_tool("echo", {"text": "hello"})
            assert echo.content[0].text == "hello"
            assert (await session.call_tool("whoami", {})).content[0].text == "ok"
    assert not pid_file.cleanup()


@pytest.mark.anyio
async def test_wrong_value_rejected_at_initialize_session(pid_file, errlog):
    params = stub_params(pid_file, value=WRONG, expected_value=RIGHT)
    with pytest.raises(BaseException) as info:
        with anyio.fail_after(scaled(10)):
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
    err = first_mcp_error(info.value)
    assert (err.code, err.message) == (-32001, "invalid API key for STUB_API_KEY")
    assert WRONG not in repr(info.value) and RIGHT not in _read_err(errlog)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_wrong_value_rejected_via_client(pid_file, errlog, mode):
    params = stub_params(pid_file, value=WRONG, expected_value=RIGHT)
    err = await connect_error(stdio_client(params, errlog=errlog), mode)
    # The stub rejects server/discover with the same error, so auto falls back and sees it too.
    assert (err.code, err.message) == (-32001, "invalid API key for STUB_API_KEY")
    assert WRONG not in err.message


@pytest.mark.anyio
async def test_missing_value_rejected(pid_file, errlog):
    params = stub_params(pid_file, expected_value=RIGHT)
    err = await connect_error(stdio_client(params, errlog=errlog))
    assert (err.code, err.message) == (-32001, "missing STUB_API_KEY")


@pytest.mark.anyio
async def test_forced_protocol_2024_11_05(pid_file, errlog):
    params = stub_params(pid_file, require=False, protocol="2024-11-05")
    with anyio.fail_after(scaled(10)):
        async with Client(stdio_client(params, errlog=errlog), mode="auto") as client:
            assert client.protocol_version == "2024-11-05"
            assert len((await client.list_tools()).tools) == 2


@pytest.mark.anyio
async def test_many_tools_paginate_through_sdk(pid_file, errlog):
    params = stub_params(pid_file, require=False, mode="many_tools")
    names: list[str] = []
    pages = 0
    with anyio.fail_after(scaled(10)):
        async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            cursor = None
            while True:
                page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
                names += [t.name for t in page.tools]
                pages += 1
                cursor = page.next_cursor
                if cursor is None:
                    break
    assert (len(names), len(set(names)), pages) == (500, 500, 10)
    assert names[:2] == ["echo", "whoami"]


@pytest.mark.anyio
async def test_echo_env_leaks_value_on_purpose(pid_file, errlog):
    params = stub_params(pid_file, value=RIGHT, mode="echo_env")
    with anyio.fail_after(scaled(10)):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert RIGHT in tools["leak"].description
            assert (await client.call_tool("echo", {"text": "env"})).content[0].text == RIGHT
    assert f"STUB_API_KEY={RIGHT}" in _read_err(errlog)


@pytest.mark.anyio
async def test_crash_through_sdk_is_connection_closed(pid_file, errlog):
    params = stub_params(pid_file, mode="crash")
    err = await connect_error(stdio_client(params, errlog=errlog))
    assert (err.code, err.message) == (-32000, "Connection closed")
    assert "stub: fatal: simulated crash" in _read_err(errlog)


@pytest.mark.anyio
async def test_hang_after_init_times_out_tools_list(pid_file, errlog):
    params = stub_params(pid_file, require=False, mode="hang_after_init")
    with pytest.raises(BaseException) as info:
        with anyio.fail_after(scaled(10)):
            async with Client(stdio_client(params, errlog=errlog), mode="auto", read_timeout_seconds=0.3) as c:
                await c.list_tools()
    err = first_mcp_error(info.value)
    assert (err.code, err.message) == (-32001, "Request 'tools/list' timed out")


@pytest.mark.anyio
async def test_grandchild_survives_sdk_teardown(pid_file, errlog):
    params = stub_params(pid_file, require=False, mode="grandchild")
    with anyio.fail_after(scaled(10)):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:
            assert len((await client.list_tools()).tools) == 2
    stub_pid, grandchild = pid_file.pids()
    assert f"stub: grandchild pid {grandchild}" in _read_err(errlog)
    assert not alive(stub_pid)
    assert alive(grandchild)  # the SDK killed no process group: the stub exited on EOF
    assert pid_file.cleanup() == [grandchild]
    assert not alive(grandchild)


# -- stdio stub via raw JSON-RPC -----------------------------------------------------------


def test_raw_protocol_surface(pid_file):
    raw = RawStub(pid_file, require=False)
    try:
        discover = raw.request("server/discover")
        assert discover["error"]["code"] == -32601
        init = raw.request("initialize", {**INIT_PARAMS, "protocolVersion": "2025-06-18"})
        assert init["result"]["protocolVersion"] == "2025-06-18"
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert raw.request("ping") == {"jsonrpc": "2.0", "id": 3, "result": {}}
        assert raw.request("resources/list")["error"]["code"] == -32601
        assert raw.request("tools/list", {"cursor": "bogus"})["error"]["code"] == -32602
    finally:
        code, err = raw.close()
    assert code == 0 and "stub: stdin closed" in err


def test_raw_unknown_version_gets_latest_and_discover_rejected_with_auth(pid_file):
    raw = RawStub(pid_file, value=WRONG, expected_value=RIGHT)
    try:
        discover = raw.request("server/discover")
        assert discover["error"] == {"code": -32001, "message": "invalid API key for STUB_API_KEY"}
    finally:
        raw.close()
    raw = RawStub(pid_file, require=False)
    try:
        init = raw.request("initialize", {**INIT_PARAMS, "protocolVersion": "1999-01-01"})
        assert init["result"]["protocolVersion"] == "2025-11-25"
    finally:
        raw.close()


def test_raw_protocol_flag(pid_file):
    raw = RawStub(pid_file, ("--protocol", "2024-11-05"), require=False)
    try:
        assert raw.request("initialize", INIT_PARAMS)["result"]["protocolVersion"] == "2024-11-05"
    finally:
        raw.close()


def test_crash_exits_3_with_stderr_line(pid_file):
    argv, env = stub_bundle.stub_command(mode="crash", pid_file=pid_file.path)
    done = subprocess.run(argv, env=env, input=b"", capture_output=True, timeout=scaled(10))
    assert done.returncode == 3
    assert "stub: fatal: simulated crash" in done.stderr.decode()
    assert done.stdout == b""


def test_garbage_writes_non_json(pid_file):
    raw = RawStub(pid_file, require=False, mode="garbage")
    try:
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
        line = raw.readline(5)
        with pytest.raises(ValueError):
            json.loads(line)
    finally:
        raw.close()


def test_hang_never_answers_but_exits_on_eof(pid_file):
    raw = RawStub(pid_file, require=False, mode="hang")
    try:
        assert raw.request("initialize", INIT_PARAMS, timeout=0.3) is None
        assert raw.proc.poll() is None
    finally:
        code, _ = raw.close()
    assert code == 0


def test_ignore_unknown_leaves_discover_unanswered(pid_file):
    raw = RawStub(pid_file, require=False, mode="ignore_unknown")
    try:
        assert raw.request("server/discover", timeout=0.2) is None
        assert raw.request("initialize", INIT_PARAMS)["id"] == 2
    finally:
        raw.close()


def test_slow_delays_first_answer(pid_file):
    raw = RawStub(pid_file, require=False, mode="slow", extra_env={"STUB_SLOW_SECONDS": "0.05"})
    try:
        assert raw.request("initialize", INIT_PARAMS)["result"]["protocolVersion"] == "2025-11-25"
    finally:
        _, err = raw.close()
    assert "slow: sleeping 0.05s before answering initialize" in err


def test_ignore_sigterm_survives_sigterm(pid_file):
    raw = RawStub(pid_file, require=False, mode="ignore_sigterm", extra_env={"STUB_EXIT_DELAY": "0"})
    try:
        assert "result" in raw.request("initialize", INIT_PARAMS)
        raw.proc.send_signal(signal.SIGTERM)
        assert raw.request("ping")["result"] == {}  # still answering after SIGTERM
    finally:
        code, _ = raw.close()
    assert code == 0


def test_server_py_imports_only_stdlib():
    tree = ast.parse((STUB_DIR / "server.py").read_text())
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert mods - {"__future__"} <= set(sys.stdlib_module_names), mods


# -- SDK-based modern stub ----------------------------------------------------------------


def modern_params(pid_file: PidFile, value: str) -> StdioServerParameters:
    env = {"STUB_API_KEY": value, "STUB_EXPECTED_SHA256": stub_bundle.sha256_hex(RIGHT)}
    env["STUB_PID_FILE"] = str(pid_file.path)
    return StdioServerParameters(command=sys.executable, args=[str(MODERN)], env=env)


@pytest.mark.anyio
async def test_modern_stub_speaks_2026_in_auto_mode(pid_file, errlog):
    with anyio.fail_after(scaled(20)):
        async with Client(stdio_client(modern_params(pid_file, RIGHT), errlog=errlog), mode="auto") as client:
            assert client.protocol_version == "2026-07-28"
            assert [t.name for t in (await client.list_tools()).tools] == ["ping_modern"]
            assert (await client.call_tool("ping_modern", {})).content[0].text == "pong"


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "code"),
    [("legacy", -32001), ("auto", -32022)],  # auto: the discover veto locks the era, hiding the message
)
async def test_modern_stub_rejects_wrong_value(pid_file, errlog, mode, code):
    err = await connect_error(stdio_client(modern_params(pid_file, WRONG), errlog=errlog), mode)
    assert err.code == code
    if mode == "legacy":
        assert err.message == "invalid API key for STUB_API_KEY"
    assert "invalid API key for STUB_API_KEY" in _read_err(errlog)


# -- streamable HTTP stub ----------------------------------------------------------------

TOKEN = "Bearer tok-5d1e8c2b9a7f"


@pytest.fixture(scope="module")
def http_url():
    with http_server.serve_http_stub(expected_sha256=http_server.sha256_hex(TOKEN)) as url:
        yield url


@pytest.mark.parametrize("headers", [{"Authorization": "Bearer nope"}, {}])
def test_http_wrong_or_missing_header_is_401(http_url, headers):
    resp = httpx.post(http_url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers, timeout=scaled(10))
    assert resp.status_code == 401
    assert resp.json() == {"error": "invalid token"}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_http_401_through_sdk(http_url, mode):
    statuses: list[int] = []

    async def record(response) -> None:
        statuses.append(response.status_code)

    async with httpx2.AsyncClient(headers={"Authorization": "Bearer nope"}, event_hooks={"response": [record]}) as hc:
        err = await connect_error(streamable_http_client(http_url, http_client=hc), mode)
    assert (err.code, err.message) == (-32603, "Server returned an error response")
    assert statuses and set(statuses) == {401}  # only an HTTP hook sees the status


@pytest.mark.anyio
async def test_http_right_header_session(http_url):
    with anyio.fail_after(scaled(10)):
        async with httpx2.AsyncClient(headers={"Authorization": TOKEN}) as hc:
            async with streamable_http_client(http_url, http_client=hc) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                assert [t.name for t in (await session.list_tools()).tools] == ["echo", "whoami"]
                assert (await session.call_tool("whoami", {})).content[0].text == "ok"


@pytest.mark.anyio
async def test_http_right_header_client_auto(http_url):
    with anyio.fail_after(scaled(10)):
        async with httpx2.AsyncClient(headers={"Authorization": TOKEN}) as hc:
            async with Client(streamable_http_client(http_url, http_client=hc), mode="auto") as client:
                assert client.protocol_version == "2026-07-28"
                assert (await client.call_tool("echo", {"text": "hi"})).content[0].text == "hi"


# -- MCPB bundle ---------------------------------------------------------------------------


def test_bundle_hash_and_no_plain_value(tmp_path):
    path, sha = stub_bundle.build_stub_bundle(tmp_path, expected_value=RIGHT, mode="many_tools")
    data = path.read_bytes()
    assert sha == hashlib.sha256(data).hexdigest()
    assert RIGHT.encode() not in data
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["manifest.json", "server/server.py"]
        assert all(RIGHT.encode() not in zf.read(n) for n in zf.namelist())
        manifest = json.loads(zf.read("manifest.json"))
    cfg = manifest["server"]["mcp_config"]
    assert cfg["args"] == ["${__dirname}/server/server.py"]
    assert cfg["env"]["STUB_API_KEY"] == "${user_config.STUB_API_KEY}"
    assert cfg["env"]["STUB_EXPECTED_SHA256"] == stub_bundle.sha256_hex(RIGHT)
    assert manifest["user_config"]["STUB_API_KEY"]["sensitive"] is True
    again, sha2 = stub_bundle.build_stub_bundle(tmp_path / "b", expected_value=RIGHT, mode="many_tools")
    assert sha2 == sha  # deterministic


def test_server_json_matches_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    doc = stub_bundle.stub_server_json("file:///x/stub-1.0.0.mcpb", "a" * 64)
    schema_path = FIXTURES / "registry/official/schemas/2025-12-11.server.schema.json"
    if not schema_path.exists():
        pytest.skip("schema fixture not present")
    jsonschema.validate(doc, json.loads(schema_path.read_text()))
    assert doc["packages"][0]["environmentVariables"][0]["isSecret"] is True


@pytest.mark.anyio
@pytest.mark.parametrize(("value", "ok"), [(RIGHT, True), (WRONG, False)])
async def test_bundle_runs_from_manifest(tmp_path, pid_file, errlog, value, ok):
    path, _ = stub_bundle.build_stub_bundle(tmp_path, expected_value=RIGHT)
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(path) as zf:
        zf.extractall(unpacked)
    cfg = json.loads((unpacked / "manifest.json").read_text())["server"]["mcp_config"]

    def fill(s: str) -> str:
        return s.replace("${__dirname}", str(unpacked)).replace("${user_config.STUB_API_KEY}", value)

    env = {k: fill(v) for k, v in cfg["env"].items()} | {"STUB_PID_FILE": str(pid_file.path)}
    params = StdioServerParameters(command=cfg["command"], args=[fill(a) for a in cfg["args"]], env=env)
    if not ok:
        err = await connect_error(stdio_client(params, errlog=errlog))
        assert err.message == "invalid API key for STUB_API_KEY"
        return
    with anyio.fail_after(scaled(10)):
        async with Client(stdio_client(params, errlog=errlog), mode="auto") as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["echo", "whoami"]
