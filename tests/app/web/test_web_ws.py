"""The websocket ``/ws`` of ``mcp-setup serve`` (a real subprocess): starting, answering and
cancelling an agent run, a reloaded tab taking a run over, and messages it cannot use."""

from __future__ import annotations

import json
import logging
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.browser.serve import STUB, Served, serving
from tests.helpers.timeouts import scaled

CANARY = "canary-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("web-ws"), CANARY) as s:
        yield s


class Tab:
    """A websocket client standing in for one browser tab; records every event."""

    def __init__(self, served: Served) -> None:
        self.ws = served.websocket()
        self.events: list[dict[str, Any]] = []
        self.frames: list[str] = []
        hello = self.next(lambda e: e["type"] == "hello")
        self.session_id = hello["session_id"]

    def next(self, match: Callable[[dict[str, Any]], bool], timeout: float = scaled(30.0)) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no matching event in {timeout}s; got {[e['type'] for e in self.events]}")
            frame = self.ws.recv(timeout=remaining)
            self.frames.append(frame)
            event = json.loads(frame)
            self.events.append(event)
            if match(event):
                return event

    def send(self, **message: Any) -> None:
        self.ws.send(json.dumps(message))

    def close(self) -> None:
        self.ws.close()


def of_type(kind: str, **fields: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e["type"] == kind and all(e.get(k) == v for k, v in fields.items())


def answer_secret(served: Served, prompt_id: str, value: str) -> int:
    with served.client() as http:
        return http.post(f"/api/secrets/{prompt_id}", json={"value": value}, headers=served.headers()).status_code


def test_cancel_agent_closes_the_open_secret_prompt_and_ends_the_run_as_cancelled(served: Served) -> None:
    tab = Tab(served)
    try:
        tab.send(type="start_agent", goal="set up the stub server")
        started = tab.next(of_type("agent_started"))
        request = tab.next(of_type("secret_request"))
        assert request["key_name"] == "STUB_API_KEY" and request["server"] == STUB
        assert request["run_id"] == started["run_id"] and "value" not in request
        tab.send(type="cancel_agent")
        done = tab.next(of_type("secret_done", prompt_id=request["prompt_id"]))
        assert done["status"] == "cancelled"
        finished = tab.next(of_type("agent_done", run_id=started["run_id"]))
        assert finished["result"]["status"] == "cancelled"
        assert "transcript" not in finished["result"]
        assert answer_secret(served, request["prompt_id"], CANARY) == 410  # too late: it was cancelled
    finally:
        tab.close()
    assert served.rpc("servers.list")["result"] == {"ok": True, "servers": []}


def test_a_new_tab_takes_over_a_run_whose_tab_went_away_with_its_open_prompt(served: Served) -> None:
    first = Tab(served)
    first.send(type="start_agent", goal="set up the stub server")
    started = first.next(of_type("agent_started"))
    request = first.next(of_type("secret_request"))
    first.close()  # a reload

    second = Tab(served)
    try:
        replayed = second.next(of_type("agent_started", run_id=started["run_id"]))
        assert replayed["goal"] == "set up the stub server"
        again = second.next(of_type("secret_request", prompt_id=request["prompt_id"]))
        assert again["key_name"] == "STUB_API_KEY"
        assert answer_secret(served, request["prompt_id"], "wrong-" + CANARY[::-1]) == 200
        failed = second.next(lambda e: e["type"] == "progress" and e.get("status") == "failed")
        assert failed["code"] == "rejected" and failed["stage"] == "handshake"
        question = second.next(of_type("agent_question", run_id=started["run_id"]))
        assert "Re-enter STUB_API_KEY" in question["choices"]
        second.send(type="answer", question_id=question["question_id"], answer="Cancel")
        closed = second.next(of_type("question_closed", question_id=question["question_id"]))
        assert closed["answer"] == "Cancel"
        finished = second.next(of_type("agent_done", run_id=started["run_id"]))
        assert finished["result"]["status"] == "cancelled"
        assert all(CANARY not in f and CANARY[::-1] not in f for f in second.frames)
    finally:
        second.close()


def test_messages_the_server_cannot_use_get_an_error_event_and_the_socket_stays_open(served: Served) -> None:
    tab = Tab(served)
    try:
        tab.ws.send("{not json")
        assert tab.next(of_type("error"))["code"] == "invalid_message"
        tab.ws.send(b"\x00\x01")
        assert tab.next(of_type("error"))["code"] == "invalid_message"
        tab.send(type="launch_missiles")
        assert tab.next(of_type("error"))["code"] == "unknown_message"
        tab.send(type="answer", question_id="q_nope", answer="yes")
        assert tab.next(of_type("error"))["code"] == "question_closed"
        tab.send(type="start_agent", goal="   ")
        assert tab.next(of_type("error"))["code"] == "invalid_input"
        tab.send(type="ping")
        assert tab.next(lambda e: e["type"] in ("pong", "error"))["type"] == "pong"
    finally:
        tab.close()


def test_one_tab_runs_one_setup_at_a_time(served: Served) -> None:
    tab = Tab(served)
    try:
        tab.send(type="start_agent", goal="set up the stub server")
        tab.next(of_type("agent_started"))
        request = tab.next(of_type("secret_request"))
        tab.send(type="start_agent", goal="set up the stub server")
        assert tab.next(of_type("error"))["code"] == "agent_busy"
        tab.send(type="cancel_agent")
        assert tab.next(of_type("agent_done"))["result"]["status"] == "cancelled"
        assert any(e["type"] == "secret_done" and e["prompt_id"] == request["prompt_id"] for e in tab.events)
    finally:
        tab.close()


class RawTab:
    """A tab on a plain socket (websockets' sans-I/O protocol): it writes many frames without
    reading any, then reads everything, so the test sees exactly what the server sent before
    its close answer."""

    def __init__(self, served: Served) -> None:
        from websockets.client import ClientProtocol
        from websockets.uri import parse_uri

        self.sock = socket.create_connection(("127.0.0.1", served.port), timeout=scaled(30))
        self.protocol = ClientProtocol(parse_uri(f"ws://127.0.0.1:{served.port}/ws"), origin=served.origin)  # type: ignore[arg-type]
        request = self.protocol.connect()
        request.headers["X-MCP-Setup-Token"] = served.token
        self.protocol.send_request(request)
        self._flush()
        while self.protocol.state.name == "CONNECTING":
            self.protocol.receive_data(self.sock.recv(65536))
        self.protocol.events_received()  # the handshake response

    def _flush(self) -> None:
        self.sock.sendall(b"".join(self.protocol.data_to_send()))

    def send_many(self, text: str, count: int) -> None:
        for _ in range(count):
            self.protocol.send_text(text.encode())
        self._flush()

    def close_and_read(self) -> tuple[list[dict[str, Any]], int | None]:
        """Send a close, then read (bounded by the socket timeout) up to the server's close."""
        from websockets.frames import Close, Opcode

        self.protocol.send_close(1000)
        self._flush()
        events: list[dict[str, Any]] = []
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return events, None
                self.protocol.receive_data(data)
                for frame in self.protocol.events_received():
                    if frame.opcode == Opcode.CLOSE:
                        return events, Close.parse(frame.data).code
                    events.append(json.loads(frame.data))
        finally:
            self.sock.close()


@pytest.mark.parametrize("message", [json.dumps({"type": "ping"}), "{not json"], ids=["ping", "unusable"])
def test_a_client_that_sends_thousands_of_messages_without_reading_gets_a_clean_close(
    served: Served, message: str
) -> None:
    # The review's client: websockets stops reading its socket once 16 messages wait unread,
    # so the answers queued ahead of the server's close frame hid it (10 s, then 1006).
    ws = served.websocket()
    for _ in range(3000):
        ws.send(message)
    ws.close()
    assert ws.close_code == 1000

    tab = RawTab(served)  # what the server sent before its close answer
    tab.send_many(message, 3000)
    events, code = tab.close_and_read()
    assert code == 1000
    # Few frames ahead of the close (the hello and a burst of answers, or none of them when
    # the close was read before the session's sender ran: queued frames are not sent after it).
    assert len(events) < 16
    assert {e["type"] for e in events} <= {"hello", "pong" if "ping" in message else "error"}


def test_a_tab_that_is_not_reading_costs_one_warning_not_one_per_dropped_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from app.web.ws import _MAX_QUEUE, _Session

    session = _Session("ses_test", websocket=None)  # type: ignore[arg-type]  # no pump: nothing is sent
    with caplog.at_level(logging.WARNING, logger="app.web.ws"):
        sent = [session.send_text(json.dumps({"type": "progress", "n": n})) for n in range(3 * _MAX_QUEUE)]
    assert sent.count(True) == _MAX_QUEUE and session.queue.qsize() == _MAX_QUEUE
    assert [r.getMessage() for r in caplog.records].count(
        "web: a browser session is not reading; dropping its events until it catches up"
    ) == 1


def test_answers_to_a_flooding_tab_are_rate_limited_and_come_back_as_the_tab_slows_down() -> None:
    from app.web.ws import _Session

    now = [100.0]
    session = _Session("ses_test", websocket=None, clock=lambda: now[0])  # type: ignore[arg-type]
    assert [session.send_answer('{"type":"pong"}') for _ in range(3000)].count(True) == 8  # the burst
    now[0] += 2.5
    assert [session.send_answer('{"type":"pong"}') for _ in range(10)].count(True) == 2  # one a second
    assert session.queue.qsize() == 10
    assert session.send_text('{"type":"progress"}')  # the server's own events are not limited


def test_a_tab_with_many_prompts_queued_closes_at_once_and_gets_the_rest_as_earlier_ones_close(tmp_path) -> None:
    """#24 item 14: sixty prompts queued for a tab that reads 16 frames ahead hid the server's close
    frame from it (10 s, then 1006). A tab gets a few prompts at a time; the next one follows
    when one closes."""
    from tests.browser.serve import make_catalog, start_serve, stop_serve

    served = start_serve(tmp_path, make_catalog(tmp_path, CANARY))  # its own serve: these prompts stay open
    try:
        with served.websocket() as reader:
            first = json.loads(reader.recv(timeout=scaled(30)))
            assert first["type"] == "hello"
            not_reading = served.websocket()
            opened = [
                served.rpc("mcp_setup_request_secret", {"key_name": f"KEY_{n}", "prompt": "p"})["result"]
                for n in range(60)
            ]
            not_reading.close_timeout = scaled(3)  # a stall would end here as 1006
            not_reading.close()
            assert not_reading.close_code == 1000

            def prompt_events(timeout: float) -> Iterator[dict[str, Any]]:
                while True:
                    event = json.loads(reader.recv(timeout=timeout))
                    if event["type"] in ("secret_request", "secret_done"):
                        yield event

            events = prompt_events(scaled(30))
            seen = [next(events) for _ in range(8)]
            assert [e["type"] for e in seen] == ["secret_request"] * 8
            with pytest.raises(TimeoutError):  # the ninth is held back
                next(prompt_events(1))
            assert answer_secret(served, seen[0]["prompt_id"], CANARY) == 200
            after = [next(events) for _ in range(2)]
            assert [e["type"] for e in after] == ["secret_done", "secret_request"]
            assert after[1]["prompt_id"] in {p["prompt_id"] for p in opened} - {e["prompt_id"] for e in seen}
    finally:
        stop_serve(served)
