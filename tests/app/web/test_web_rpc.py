"""JSON-RPC 2.0 at ``/rpc`` of ``mcp-setup serve`` (a real subprocess): errors, batches, tools,
and ``spawn_subagent`` answered over the websocket of the same session."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.browser.serve import STUB, Served, serving
from tests.helpers.timeouts import scaled

CANARY = "canary-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("web-rpc"), CANARY) as s:
        yield s


def post(served: Served, body: Any, *, raw: bytes | None = None, content_type: str = "application/json") -> Any:
    with served.client() as http:
        data = raw if raw is not None else json.dumps(body).encode()
        return http.post("/rpc", content=data, headers=served.headers(**{"Content-Type": content_type}))


def test_malformed_json_gets_a_parse_error_not_a_500(served: Served) -> None:
    response = post(served, None, raw=b'{"jsonrpc": "2.0", "method": ')
    assert response.status_code == 200
    body = response.json()
    assert body["error"]["code"] == -32700 and body["id"] is None
    assert "Traceback" not in response.text


def test_an_unknown_method_gets_method_not_found(served: Served) -> None:
    body = post(served, {"jsonrpc": "2.0", "id": 7, "method": "os.system", "params": {}}).json()
    assert body == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32601,
            "message": "Method not found. The methods are the mcp_setup_* tools, spawn_subagent, servers.* and tool_registry_*.",
        },
    }


@pytest.mark.parametrize(
    ("request_body", "why"),
    [
        ({"jsonrpc": "1.0", "id": 1, "method": "servers.list"}, "wrong version"),
        ({"id": 1, "method": "servers.list"}, "no version"),
        ({"jsonrpc": "2.0", "id": 1}, "no method"),
        ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "servers.list"}, "id of the wrong type"),
        ("servers.list", "not an object"),
        ([], "an empty batch"),
    ],
)
def test_an_invalid_request_gets_invalid_request(served: Served, request_body: Any, why: str) -> None:
    response = post(served, request_body)
    assert response.status_code == 200, why
    body = response.json()
    assert body["error"]["code"] == -32600, why


@pytest.mark.parametrize(
    ("method", "params", "code"),
    [
        ("mcp_setup_get", [STUB], "invalid_input"),  # by position: we take named params only
        ("mcp_setup_get", {}, "invalid_input"),  # qualified_name missing
        ("mcp_setup_search", {"page_size": "many"}, "invalid_input"),
        ("servers.remove", {"server_id": "srv_x", "force": True}, "invalid_input"),
        ("servers.reconnect", {}, "invalid_input"),
        ("spawn_subagent", {"archetype_id": "mcp_setup"}, "invalid_input"),  # no goal
        ("spawn_subagent", {"goal": "set up the stub server", "archetype_id": "no_such_agent"}, "invalid_input"),
        ("spawn_subagent", {"goal": "set up the stub server", "driver": "no_such_driver"}, "invalid_input"),
    ],
)
def test_bad_params_get_invalid_params_with_the_core_code(served: Served, method: str, params: Any, code: str) -> None:
    body = post(served, {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}).json()
    assert body["id"] == 3
    assert body["error"]["code"] == -32602, body
    assert body["error"]["data"]["code"] == code
    assert body["error"]["message"]


def test_a_tool_error_is_a_jsonrpc_error_carrying_the_stable_code(served: Served) -> None:
    body = post(
        served,
        {"jsonrpc": "2.0", "id": "a", "method": "mcp_setup_get", "params": {"qualified_name": "io.example/nope"}},
    ).json()
    assert body["error"]["code"] == -32000
    assert body["error"]["data"]["code"] == "not_found"
    gone = post(
        served, {"jsonrpc": "2.0", "id": "b", "method": "servers.remove", "params": {"server_id": "srv_nope"}}
    ).json()
    assert gone["error"]["code"] == -32000 and gone["error"]["data"]["code"] == "not_found"
    again = post(
        served, {"jsonrpc": "2.0", "id": "c", "method": "servers.reconnect", "params": {"server_id": "srv_nope"}}
    ).json()
    assert again["error"]["data"]["code"] == "not_found"


def test_every_tool_is_a_method_returning_the_tool_json(served: Served) -> None:
    found = served.rpc("mcp_setup_search", {"query": "stub"})["result"]
    assert [s["qualified_name"] for s in found["servers"]] == [STUB]
    detail = served.rpc("mcp_setup_get", {"qualified_name": STUB})["result"]
    assert [k["name"] for k in detail["required_env_keys"]] == ["STUB_API_KEY"]
    assert served.rpc("servers.list")["result"] == {"ok": True, "servers": []}
    assert served.rpc("mcp_setup_list_servers")["result"] == {"ok": True, "servers": []}


def test_a_batch_answers_every_request_in_order_and_skips_notifications(served: Served) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "servers.list"},
        {"jsonrpc": "2.0", "method": "servers.list"},  # a notification: no answer
        {"jsonrpc": "2.0", "id": 2, "method": "nope"},
        {"jsonrpc": "2.0", "id": 3, "method": "mcp_setup_get", "params": {}},
        42,
    ]
    answers = post(served, batch).json()
    assert [a.get("id") for a in answers] == [1, 2, 3, None]
    assert answers[0]["result"] == {"ok": True, "servers": []}
    assert [a.get("error", {}).get("code") for a in answers] == [None, -32601, -32602, -32600]


def test_a_request_of_only_notifications_gets_no_body(served: Served) -> None:
    single = post(served, {"jsonrpc": "2.0", "method": "servers.list"})
    assert single.status_code == 204 and single.content == b""
    batch = post(served, [{"jsonrpc": "2.0", "method": "servers.list"}, {"jsonrpc": "2.0", "method": "nope"}])
    assert batch.status_code == 204 and batch.content == b""


def test_a_body_that_is_not_json_or_too_big_is_refused_without_a_traceback(served: Served) -> None:
    text = post(served, None, raw=b"servers.list", content_type="text/plain")
    assert text.status_code == 415 and text.json()["error"]["code"] == -32600
    big = post(served, None, raw=b'{"x": "' + b"a" * (1 << 20) + b'"}')
    assert big.status_code == 413 and big.json()["error"]["code"] == -32600
    assert "Traceback" not in text.text + big.text


class WsListener:
    """Reads a websocket in a thread: answers secret prompts and questions like a user would."""

    def __init__(self, served: Served, secrets: list[str]) -> None:
        self.served = served
        self.secrets = secrets
        self.frames: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.ws = served.websocket()
        hello = json.loads(self.ws.recv(timeout=scaled(10)))
        assert hello["type"] == "hello"
        self.frames.append(json.dumps(hello))
        self.session_id = hello["session_id"]
        self.posted: list[int] = []
        self.arrived = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            for frame in self.ws:
                self.frames.append(frame if isinstance(frame, str) else frame.decode())
                event = json.loads(frame)
                with self.arrived:
                    self.events.append(event)
                    self.arrived.notify_all()
                if event["type"] == "secret_request":
                    with self.served.client() as http:
                        r = http.post(
                            f"/api/secrets/{event['prompt_id']}",
                            json={"value": self.secrets.pop(0)},
                            headers=self.served.headers(),
                        )
                        self.posted.append(r.status_code)
                elif event["type"] == "agent_question":
                    choice = next((c for c in event["choices"] or [] if c.startswith("Re-enter")), None)
                    choice = choice or (event["choices"] or ["yes"])[0]
                    self.ws.send(json.dumps({"type": "answer", "question_id": event["question_id"], "answer": choice}))
        except ConnectionClosed:
            pass

    def wait_for(self, match: Callable[[dict[str, Any]], bool], timeout: float = scaled(30.0)) -> dict[str, Any]:
        """The first event (already received or still to come) that ``match``es."""
        with self.arrived:
            ok = self.arrived.wait_for(lambda: any(match(e) for e in self.events), timeout)
            assert ok, f"no matching event in {timeout}s; got {[e['type'] for e in self.events]}"
            return next(e for e in self.events if match(e))

    def close(self) -> None:
        self.ws.close()
        self.thread.join(scaled(10))


def remove_all(served: Served) -> list[str]:
    """Uninstall whatever a test installed, so a failure does not cascade into the next test."""
    removed = []
    for server in served.rpc("servers.list")["result"]["servers"]:
        assert served.rpc("servers.remove", {"server_id": server["server_id"]})["result"] == {
            "ok": True,
            "removed": True,
        }
        removed.append(server["server_id"])
    return removed


def test_spawn_subagent_over_jsonrpc_returns_the_result_shape_and_talks_over_the_websocket(served: Served) -> None:
    listener = WsListener(served, ["wrong-" + CANARY[::-1], CANARY])
    try:
        with served.client(timeout=scaled(120)) as http:
            response = http.post(
                "/rpc",
                json={
                    "jsonrpc": "2.0",
                    "id": 9,
                    "method": "spawn_subagent",
                    "params": {"archetype_id": "mcp_setup", "goal": "set up the stub server"},
                },
                headers=served.headers(**{"X-MCP-Setup-Session": listener.session_id}),
            )
        body = response.json()
        assert "error" not in body, body
        result = body["result"]
        assert set(result) >= {"status", "summary", "transcript"}
        assert set(result) <= {"status", "server_id", "tools", "summary", "transcript"}
        assert result["status"] == "installed", result["summary"]
        assert result["server_id"].startswith("srv_")
        assert {t["name"] for t in result["tools"]} >= {"echo", "whoami"}
        assert isinstance(result["transcript"], list) and result["transcript"]
        assert listener.posted == [200, 200]  # wrong value, then the right one, each through /api/secrets
        # The RPC answer may overtake the last websocket frames: wait for them (bounded).
        listener.wait_for(lambda e: e["type"] == "agent_done")
        listener.wait_for(lambda e: e["type"] == "server_status" and e["status"] == "connected")
        types = [e["type"] for e in listener.events]
        for expected in (
            "agent_started",
            "agent_message",
            "agent_question",
            "secret_request",
            "secret_done",
            "progress",
            "agent_done",
        ):
            assert expected in types, (expected, types)
        stages = [
            (e["stage"], e["status"]) for e in listener.events if e["type"] == "progress" and e["stage"] != "agent_step"
        ]
        assert ("handshake", "failed") in stages  # the wrong key was rejected
        for stage in [
            ("resolving", "started"),
            ("starting", "started"),
            ("handshake", "done"),
            ("tools_listed", "done"),
        ]:
            assert stage in stages, (stage, stages)
        rejected = [e for e in listener.events if e["type"] == "progress" and e.get("status") == "failed"]
        assert rejected[0]["code"] == "rejected"
        assert any(e["type"] == "server_status" and e["status"] == "connected" for e in listener.events)
        everything = "\n".join(listener.frames) + response.text
        assert CANARY not in everything and CANARY[::-1] not in everything
        listed = served.rpc("servers.list")["result"]["servers"]
        assert [(s["server_id"], s["status"], s["installed_by"]) for s in listed] == [
            (result["server_id"], "connected", "agent")
        ]
        assert listed[0]["installed_by_words"] == "installed by an agent"  # the card's words, beside the label
    finally:
        listener.close()
        removed = remove_all(served)
    assert removed == [result["server_id"]]
    assert served.rpc("servers.list")["result"] == {"ok": True, "servers": []}


def test_an_install_over_jsonrpc_reports_each_stage_with_the_bundle_download_to_the_calling_tab(served: Served) -> None:
    caller = WsListener(served, [CANARY])  # answers the secret prompt like a user would
    bystander = WsListener(served, [])
    session = {"X-MCP-Setup-Session": caller.session_id}
    try:
        asked = served.rpc(
            "mcp_setup_request_secret",
            {"key_name": "STUB_API_KEY", "prompt": "Your stub key", "server": STUB},
            **session,
        )["result"]
        caller.wait_for(lambda e: e["type"] == "secret_done" and e["prompt_id"] == asked["prompt_id"])
        assert caller.posted == [200]
        installed = served.rpc(
            "mcp_setup_install_and_connect",
            {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": asked["ref"]}},
            **session,
        )["result"]
        assert installed["status"] == "connected", installed
        caller.wait_for(lambda e: e["type"] == "progress" and e["stage"] == "connected")
        bystander.wait_for(lambda e: e["type"] == "server_status" and e["status"] == "connected")
        progress = [e for e in caller.events if e["type"] == "progress" and e["status"] != "output"]  # stderr lines
        assert [(e["stage"], e["status"]) for e in progress] == [
            ("resolving", "started"),
            ("resolving", "done"),
            ("downloading", "started"),  # the stub is an MCPB bundle
            ("downloading", "done"),
            ("starting", "started"),
            ("handshake", "done"),
            ("tools_listed", "done"),
            ("installing", "started"),
            ("installing", "done"),
            ("connected", "done"),
        ]
        for event in progress:
            assert event["action"] == "mcp_setup_install_and_connect" and event["server"] == STUB
            assert "run_id" not in event  # a direct call, not an agent run
        assert {t["name"] for t in progress[6]["tools"]} >= {"echo", "whoami"}
        assert progress[-1]["server_id"] == installed["server_id"]
        assert not any(e["type"] in ("progress", "secret_request") for e in bystander.events)  # not its call
        assert all(CANARY not in f for f in caller.frames + bystander.frames)
    finally:
        caller.close()
        bystander.close()
        removed = remove_all(served)
    assert removed == [installed["server_id"]]
