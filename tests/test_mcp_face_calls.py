"""What a client sees of a proxied ``tools/call`` through ``mcp-setup mcp``.

Every call goes through the SDK's server in the face and the SDK's client to the installed
server. One conversation checks the gateway's rules on the wire: a reflected secret redacted, a
guessed protected value refused by the guard, a hidden tool refused, a result over the cap cut,
an answer the gateway cannot read said in words, a server's sampling request relayed redacted
and answered, progress under the client's token before the answer, and the ids of concurrent
calls never mixed. A cancelled call is never answered and the end of input does not wait for
it; calls that share an id are each answered.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

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
#: The stub's progress notifications before each answer of ``echo`` (STUB_FLOOD_COUNT).
PROGRESS_COUNT = 3


def _env(home: Path) -> dict[str, str]:
    return face_env(
        home, MCP_SETUP_MAX_RESULT_CHARS="1000", MCP_SETUP_SANDBOX="off"
    )  # the tools file is outside any sandbox


#: The stub's ``echo`` as it lists it: pinned at install, it is callable before the server starts.
ECHO = {
    "name": "echo",
    "description": "Echo the given text back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string", "description": "Text to echo"}},
        "required": ["text"],
    },
}


def _install(home: Path, canary: str, tools: list[dict[str, Any]] | None = None) -> None:
    """The stub installed in ``home``, its tools recorded when it first lists them (or ``tools``
    recorded at install, as a tested install records them)."""
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
        server = store.servers.install(
            qualified_name="io.test/stub",
            source="local",
            version="1",
            package_type="stdio",
            launch_spec=stub_launch(
                canary, "echo_env,flood", STUB_TOOLS_FILE=str(tools_file), STUB_FLOOD_COUNT=str(PROGRESS_COUNT)
            ),
            installed_by="test",
            tools_hash="x",
            env={"STUB_API_KEY": (canary, True)},
            title="Stub",
            tools=tools,
        )
        store.pins.set_hidden_tools(server.server_id, ["quiet"], actor="user:terminal")


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
            "params": {  # its progress notifications, then the answer
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
    env: dict[str, str], script: list[dict[str, Any]], cancel: tuple[Any, Any] | None = None
) -> tuple[dict[Any, Any], list[dict[str, Any]], str]:
    """Initialize (declaring sampling), load the core (the server starts and its tools are
    recorded), call once, then send every call of ``script`` at once, answering the server's
    sampling requests as they come (or, with ``cancel = (request id, the id as the cancel
    names it)``, cancelling that request instead); close stdin once every other call is
    answered, and require the face to exit soon after (well within its wait for unanswered
    requests). Returns answers by id, every message on stdout in order, and stderr."""
    first = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"sampling": {}},
                "clientInfo": {"name": "calls-test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _call("load", "mcp_setup_list_servers", {}),
    ]
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
                                    "params": {"requestId": cancel[1], "reason": "user gave up"},
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
                # (the installed server is up before the script's calls).
                await until(lambda m: m.get("method") == "notifications/tools/list_changed")
                await send(_call("warm", "stub__whoami", {}))
                await until(lambda m: m.get("id") == "warm")
                await send(*script)
                if cancel is not None:  # the face reads the cancel before this request
                    await until(lambda m: m.get("method") == "sampling/createMessage")
                    await send({"jsonrpc": "2.0", "id": "after", "method": "ping"})
                    await until(lambda m: m.get("id") == "after")
                for call in script:
                    if cancel is None or call["id"] != cancel[0]:
                        await until(lambda m, rid=call["id"]: m.get("id") == rid and "method" not in m)
                await stdin.aclose()
            with anyio.fail_after(scaled(10)):  # the face waits up to 60 s for a request never answered
                await proc.wait()
    answers = {m["id"]: m for m in seen if "id" in m and "method" not in m}
    return answers, seen, err.decode("utf-8", "replace")


def _cut(answer: dict[str, Any]) -> None:
    """``answer`` is stub__big's result, cut at MCP_SETUP_MAX_RESULT_CHARS with a note."""
    cut = answer["result"]["content"]
    assert cut[0]["text"] == "z" * len(cut[0]["text"]) and len(cut[0]["text"]) <= 1000
    assert "characters were left out" in cut[-1]["text"]


async def test_every_proxied_call_is_answered_by_the_gateway_rules_with_progress_first_and_ids_kept(
    tmp_path: Path, canary: str
) -> None:
    _install(tmp_path, canary)
    answers, seen, stderr = await _converse(_env(tmp_path), _script(canary))
    assert canary not in json.dumps(seen) and canary not in stderr
    assert set(answers) == {0, "load", "warm"} | {m["id"] for m in _script(canary)}
    assert answers["warm"]["result"]["content"][0]["text"] == "ok"

    echoed = answers[1]["result"]
    assert echoed["content"][0]["text"] == "[secret:STUB_API_KEY]"  # the reflected key, redacted
    refused = answers["guess"]["result"]
    assert refused["isError"] is True and refused["structuredContent"]["error"]["code"] == "arguments_refused"
    _cut(answers[3])
    broken = answers[4]["result"]
    assert broken["isError"] is True and "cannot read" in broken["content"][0]["text"]
    quiet = answers[5]  # hidden: refused (an unknown tool, or a refusal that says the user left it out)
    assert "quiet ok" not in json.dumps(quiet)  # the stub never ran it
    assert quiet.get("error", {}).get("code") == -32602 or quiet["result"]["isError"] is True, quiet
    assert json.loads(answers[6]["result"]["content"][0]["text"]) == SAMPLED  # relayed to this client, answered
    asked = [m for m in seen if m.get("method") == "sampling/createMessage"]
    assert asked and asked[0]["params"]["messages"][0]["content"]["text"] == "my key is [secret:STUB_API_KEY]"

    # The progress of call 9 under its own token, in order, all before its answer.
    answer_at = next(i for i, m in enumerate(seen) if m.get("id") == 9 and "method" not in m)
    heard = [(i, m["params"]) for i, m in enumerate(seen) if m.get("method") == "notifications/progress"]
    assert all(params["progressToken"] == "p-9" for _, params in heard)
    assert [params["progress"] for _, params in heard] == list(range(PROGRESS_COUNT))
    assert all(i < answer_at for i, _ in heard), (heard, answer_at)
    for i in range(CONCURRENT):  # each id got its own call's answer
        assert answers[100 + i if i % 2 else f"c-{i}"]["result"]["content"][0]["text"] == f"n{i}"


@pytest.mark.parametrize("named_as", [7, "7"], ids=["its-id", "its-id-as-a-string"])
async def test_a_cancelled_call_is_never_answered_and_the_end_of_input_does_not_wait_for_it(
    tmp_path: Path, canary: str, named_as: Any
) -> None:
    _install(tmp_path, canary)
    script = [_call(7, "stub__ask", {}), _call(8, "stub__big", {})]  # 7 waits on its question to the client
    answers, seen, stderr = await _converse(_env(tmp_path), script, cancel=(7, named_as))
    assert 7 not in answers and "after" in answers  # never answered once cancelled
    _cut(answers[8])
    assert canary not in json.dumps(seen) and canary not in stderr


async def test_calls_that_share_an_id_are_each_answered_before_the_face_exits_at_the_end_of_input(
    tmp_path: Path, canary: str
) -> None:
    """As ``printf … | mcp-setup mcp`` sends them: stdin ends right after the calls, before the
    core or the server is up. The same id twice, and 7 beside "7" (two ids in JSON-RPC)."""
    _install(tmp_path, canary, tools=[ECHO])
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        _call("dup", "stub__echo", {"text": "first"}),
        _call("dup", "stub__echo", {"text": "second"}),
        _call(7, "stub__echo", {"text": "int"}),
        _call("7", "stub__echo", {"text": "string"}),
    ]
    with anyio.fail_after(scaled(60)):
        proc = await anyio.run_process(
            mcp_setup_argv("mcp"),
            input="".join(json.dumps(m) + "\n" for m in messages).encode(),
            env=_env(tmp_path),
            check=False,
        )
    stderr = proc.stderr.decode("utf-8", "replace")
    seen = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
    texts: dict[Any, list[str]] = {}
    for m in seen:
        if "method" not in m and m.get("id") != 0:
            assert "result" in m, m
            texts.setdefault(json.dumps(m["id"]), []).append(m["result"]["content"][0]["text"])
    assert sorted(texts.pop('"dup"')) == ["first", "second"], stderr[-2000:]
    assert texts == {"7": ["int"], '"7"': ["string"]}, stderr[-2000:]
    assert proc.returncode == 0 and canary not in stderr
