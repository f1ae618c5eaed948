"""The fast path of a proxied ``tools/call`` (#29, "faster, by passing through") keeps every rule.

``mcp-setup mcp`` on pipes answers a ``tools/call`` of a connected installed tool beside the SDK's
server (app/mcp/fast_calls.py), and the gateway sends it to a stdio server through the raw lane
beside the SDK session (setup_agent/launch/raw_lane.py). The same conversation with the fast path
on and off must give the same answers: a reflected secret redacted, a guessed protected value
refused by the guard, a hidden tool refused, a result over the cap cut, an answer the SDK cannot
read said in words, and the ids of concurrent calls never mixed.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from setup_agent.launch import LANE_BASE, LaneClosed, RawLane
from tests.mcp_face import face_env, mcp_setup_argv
from tests.test_connections import stub_launch
from tests.timeouts import scaled

pytestmark = pytest.mark.anyio

EXTRA = [
    {
        "name": "big",
        "description": "A long answer.",
        "inputSchema": {"type": "object", "properties": {}},
        "_stubResult": {"content": [{"type": "text", "text": "z" * 5000}], "isError": False},
    },
    {
        "name": "broken",
        "description": "Not a tools/call result.",
        "inputSchema": {"type": "object", "properties": {}},
        "_stubResult": {"content": "not a list", "isError": "perhaps"},
    },
    {"name": "quiet", "description": "Hidden by the user.", "inputSchema": {"type": "object", "properties": {}}},
    {
        "name": "ask",
        "description": "Asks the client to sample.",
        "inputSchema": {"type": "object", "properties": {}},
        "_stubRequest": {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "my key is {KEY}"}}],
                "maxTokens": 5,
            },
        },
    },
]
CONCURRENT = 8


def _env(home: Path, fast: str) -> dict[str, str]:
    return face_env(
        home, MCP_SETUP_FAST_CALLS=fast, MCP_SETUP_MAX_RESULT_CHARS="1000", MCP_SETUP_SANDBOX="off"
    )  # the tools file is outside any sandbox


def _install(home: Path, canary: str) -> None:
    import keyring.backends.fail

    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    home.mkdir(parents=True, exist_ok=True)
    tools_file = home / "tools.json"
    tools_file.write_text(json.dumps({"extra": EXTRA}))
    data = home / "data"
    data.mkdir(parents=True, exist_ok=True)
    vault = Vault.open(data, keyring_backend=keyring.backends.fail.Keyring())
    with Store.for_data_dir(data, vault) as store:
        server = store.install(
            qualified_name="io.test/stub",
            source="local",
            version="1",
            package_type="stdio",
            launch_spec=stub_launch(canary, "echo_env,flood", STUB_TOOLS_FILE=str(tools_file), STUB_FLOOD_COUNT="3"),
            installed_by="test",
            tools_hash="x",
            env={"STUB_API_KEY": (canary, True)},
            title="Stub",
            tools=None,
        )
        store.set_hidden_tools(server.server_id, ["quiet"], actor="user:terminal")


def _call(request_id: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def _script(canary: str) -> list[dict[str, Any]]:
    """The calls sent at once, after the warm-up call started the server."""
    calls = [
        _call(1, "stub__echo", {"text": "env"}),  # the stub answers with its own key
        _call("guess", "stub__echo", {"text": f"is it {canary}?"}),  # the guard refuses it
        _call(3, "stub__big", {}),  # cut at MCP_SETUP_MAX_RESULT_CHARS
        _call(4, "stub__broken", {}),  # said in words, never a validation dump
        _call(5, "stub__quiet", {}),  # hidden: an unknown tool
        _call(6, "stub__ask", {}),  # the server asks the client to sample during the call (redacted)
        {
            **_call(9, "stub__echo", {"text": "slowly"}),
            "params": {  # its 3 progress notifications, then the answer
                "name": "stub__echo",
                "arguments": {"text": "slowly"},
                "_meta": {"progressToken": "p-9"},
            },
        },
    ]
    calls += [_call(100 + i if i % 2 else f"c-{i}", "stub__echo", {"text": f"n{i}"}) for i in range(CONCURRENT)]
    return calls


SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "fine"}, "model": "m"}


async def _converse(
    env: dict[str, str], script: list[dict[str, Any]], cancel: Any = None
) -> tuple[dict[Any, Any], str, str]:
    """Initialize (declaring sampling), load the core (the server starts and its tools are
    recorded), call once, then send every call of ``script`` at once, answering the server's
    sampling requests as they come (or, with ``cancel``, cancelling that request id instead);
    close stdin once every other call is answered. Returns answers by id, stdout, stderr."""
    first = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"sampling": {}},
                "clientInfo": {"name": "fast-test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _call("load", "mcp_setup_list_servers", {}),
    ]
    out: list[str] = []
    seen: list[dict[str, Any]] = []
    err = bytearray()
    arrived = anyio.Event()
    async with await anyio.open_process(
        mcp_setup_argv("mcp"), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdin and proc.stdout and proc.stderr
        stdin = proc.stdin

        async def send(*messages: dict[str, Any]) -> None:
            await stdin.send("".join(json.dumps(m) + "\n" for m in messages).encode())

        async def read_err() -> None:
            async for chunk in proc.stderr:  # type: ignore[union-attr]
                err.extend(chunk)

        async def read_out() -> None:
            nonlocal arrived
            buffer = b""
            async for chunk in proc.stdout:  # type: ignore[union-attr]
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in (raw.decode() for raw in lines if raw.strip()):
                    out.append(line)
                    message = json.loads(line)
                    seen.append(message)
                    if message.get("method") == "sampling/createMessage" and "id" in message:
                        if cancel is None:
                            await send({"jsonrpc": "2.0", "id": message["id"], "result": SAMPLED})
                        else:  # the user gave up on the call that asked
                            await send(
                                {
                                    "jsonrpc": "2.0",
                                    "method": "notifications/cancelled",
                                    "params": {"requestId": cancel, "reason": "user gave up"},
                                }
                            )
                arrived.set()
                arrived = anyio.Event()

        async def until(check: Any) -> None:
            while not any(check(m) for m in seen):
                await arrived.wait()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_err)
            tg.start_soon(read_out)
            with anyio.fail_after(scaled(60)):
                await send(*first)
                # Its tools listed and recorded, the gateway says the list changed; then one call
                # (the fast path takes calls once the core and the server are up).
                await until(lambda m: m.get("method") == "notifications/tools/list_changed")
                await send(_call("warm", "stub__whoami", {}))
                await until(lambda m: m.get("id") == "warm")
                await send(*script)
                if cancel is not None:  # the face reads the cancel before this (SDK path) request
                    await until(lambda m: m.get("method") == "sampling/createMessage")
                    await send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
                    await until(lambda m: m.get("id") == "after")
                for call in script:
                    if call["id"] != cancel:
                        await until(lambda m, rid=call["id"]: m.get("id") == rid and "method" not in m)
                await stdin.aclose()
                await proc.wait()
    answers = {m["id"]: m for m in seen if "id" in m and "method" not in m}
    return answers, "\n".join(out), err.decode("utf-8", "replace")


async def test_the_fast_path_answers_every_call_as_the_sdk_path_does_and_keeps_every_rule(
    tmp_path: Path, canary: str
) -> None:
    answers: dict[str, dict[Any, Any]] = {}
    stdout_of: dict[str, list[str]] = {}
    for mode in ("true", "false"):
        home = tmp_path / mode
        _install(home, canary)
        env = _env(home, mode)
        answers[mode], stdout, stderr = await _converse(env, _script(canary))
        stdout_of[mode] = stdout.splitlines()
        assert canary not in stdout and canary not in stderr
        taken = "tool calls taken on the fast path" in stderr
        assert taken is (mode == "true"), stderr[-2000:]
        if mode == "true":  # every call of the script that routes to the connected server (not the hidden
            # one); the warm-up call too when the server was connected by then
            taken_count = int(re.findall(r"stdio: (\d+) tool calls taken on the fast path", stderr)[-1])
            assert taken_count in (6 + CONCURRENT, 7 + CONCURRENT), stderr[-2000:]
    fast, sdk = answers["true"], answers["false"]
    assert set(fast) == set(sdk) == {0, "load", "warm"} | {m["id"] for m in _script(canary)}
    assert fast["warm"]["result"]["content"][0]["text"] == "ok"
    for request_id in sdk:
        if request_id not in (0, "load"):  # the setup tool's answer names this data dir; the rest must match
            assert fast[request_id] == sdk[request_id], request_id

    echoed = fast[1]["result"]
    assert echoed["content"][0]["text"] == "[secret:STUB_API_KEY]"  # the reflected key, redacted
    refused = fast["guess"]["result"]
    assert refused["isError"] is True and refused["structuredContent"]["error"]["code"] == "arguments_refused"
    cut = fast[3]["result"]["content"]
    assert cut[0]["text"] == "z" * len(cut[0]["text"]) and len(cut[0]["text"]) <= 1000
    assert "characters were left out" in cut[-1]["text"]
    broken = fast[4]["result"]
    assert broken["isError"] is True and "cannot read" in broken["content"][0]["text"]
    quiet = fast[5]  # hidden: refused (an unknown tool, or a refusal that says the user left it out)
    assert "quiet ok" not in json.dumps(quiet)  # the stub never ran it
    assert quiet.get("error", {}).get("code") == -32602 or quiet["result"]["isError"] is True, quiet
    assert json.loads(fast[6]["result"]["content"][0]["text"]) == SAMPLED  # relayed to this client, answered
    asked = [
        m for m in json.loads("[" + ",".join(stdout_of["true"]) + "]") if m.get("method") == "sampling/createMessage"
    ]
    assert asked and asked[0]["params"]["messages"][0]["content"]["text"] == "my key is [secret:STUB_API_KEY]"
    progress: dict[str, list[Any]] = {}
    for mode, lines in stdout_of.items():  # the progress of call 9 under its own token, all before its answer
        messages = [json.loads(line) for line in lines]
        answer_at = next(i for i, m in enumerate(messages) if m.get("id") == 9 and "method" not in m)
        heard = [(i, m["params"]) for i, m in enumerate(messages) if m.get("method") == "notifications/progress"]
        assert all(params["progressToken"] == "p-9" for _, params in heard)
        assert len(heard) == 3 and all(i < answer_at for i, _ in heard), (mode, heard, answer_at)
        progress[mode] = [params for _, params in heard]
    assert progress["true"] == progress["false"]
    for i in range(CONCURRENT):  # each id got its own call's answer
        assert fast[100 + i if i % 2 else f"c-{i}"]["result"]["content"][0]["text"] == f"n{i}"


class _Pipe:
    """The lane's write end in a test: each line written, parsed, and an event per write."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self._wrote = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.lines.append(json.loads(data))
        self._wrote.set()

    async def drain(self) -> None:
        return None

    async def until(self, count: int) -> None:
        with anyio.fail_after(scaled(5)):
            while len(self.lines) < count:
                self._wrote.clear()
                await self._wrote.wait()


async def test_lane_answers_reach_their_own_request_in_any_order_with_progress_first() -> None:
    pipe = _Pipe()
    lane = RawLane(pipe.write, pipe.drain)
    heard: list[float] = []

    async def on_progress(params: dict[str, Any]) -> None:
        heard.append(params["progress"])

    first = asyncio.ensure_future(lane.request("tools/call", {"name": "a"}, on_progress))
    second = asyncio.ensure_future(lane.request("tools/call", {"name": "b"}))
    await pipe.until(2)
    one, two = pipe.lines
    assert one["id"] > LANE_BASE and two["id"] > LANE_BASE and one["id"] != two["id"]
    assert one["params"]["_meta"]["progressToken"] == one["id"] and "_meta" not in two["params"]
    assert not lane.take(json.dumps({"jsonrpc": "2.0", "id": 7, "result": {}}))  # the SDK's id: not the lane's
    assert not lane.take("not json")
    assert lane.take(json.dumps({"jsonrpc": "2.0", "id": str(two["id"]), "result": {"n": 2}}))  # answered first
    assert lane.take(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": one["id"], "progress": 0.5},
            }
        )
    )
    assert lane.take(json.dumps({"jsonrpc": "2.0", "id": one["id"], "result": {"n": 1}}))
    with anyio.fail_after(scaled(5)):
        assert (await second)["result"] == {"n": 2}
        assert (await first)["result"] == {"n": 1}
    assert heard == [0.5] and not lane.busy

    waiting = asyncio.ensure_future(lane.request("tools/call", {"name": "c"}))
    await pipe.until(3)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert pipe.lines[-1] == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": pipe.lines[2]["id"], "reason": "caller cancelled"},
    }
    pending = asyncio.ensure_future(lane.request("tools/call", {"name": "d"}))
    await pipe.until(5)
    lane.close()  # the server's stdout ended
    with anyio.fail_after(scaled(5)), pytest.raises(LaneClosed):
        await pending
    with pytest.raises(LaneClosed):
        await lane.request("tools/call", {"name": "e"})


async def test_a_cancelled_fast_call_gets_no_answer_as_on_the_sdk_path(tmp_path: Path, canary: str) -> None:
    answers: dict[str, dict[Any, Any]] = {}
    for mode in ("true", "false"):
        home = tmp_path / mode
        _install(home, canary)
        script = [_call(7, "stub__ask", {}), _call(8, "stub__big", {})]  # 7 waits on its question to the client
        answers[mode], stdout, stderr = await _converse(_env(home, mode), script, cancel=7)
        assert 7 not in answers[mode] and "after" in answers[mode]  # never answered once cancelled
        taken = re.findall(r"stdio: (\d+) tool calls taken on the fast path", stderr)
        assert taken[-1] in ("2", "3") if mode == "true" else not taken, stderr[-2000:]  # 3: the warm-up too
        assert canary not in stdout and canary not in stderr
    assert answers["true"][8] == answers["false"][8]
