"""An installed 2026-07-28 server's input-required results reach the client of the call in its own
era: a 2026 client gets them labelled, with the gateway's own signed ``requestState`` around the
server's, and its retry reaches the server with the server's state and its answers (guarded,
redacted); a 2025 client is asked during the call. The server is told the capabilities the
client declared, and a question the client did not declare is never sent to it. A real SDK
server in process behind the gateway's real forwarding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer

from setup_agent.errors import ProtocolError, RequestStateInvalid
from setup_agent.gateway.forwarding import Forwarding
from setup_agent.gateway.input_required import InputRetry
from setup_agent.gateway.passthrough import ResourceLinks
from setup_agent.gateway.relay import InFlight
from setup_agent.gateway.relay_rules import ORIGIN_KEY, Origin
from setup_agent.secrets.redact import Redactor
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio

SERVER_STATE = "server-state-1"
NAME_FORM = types.ElicitRequest(
    params=types.ElicitRequestFormParams(
        message="What is your name?",
        requested_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    )
)


class Seen:
    """What the server was sent, round by round."""

    def __init__(self) -> None:
        self.rounds: list[tuple[str | None, dict[str, Any], types.ClientCapabilities | None]] = []


def asking_server(seen: Seen) -> MCPServer:
    server = MCPServer("asker")

    @server.tool()
    async def ask_name(ctx: Context) -> str | types.InputRequiredResult:
        """Asks the client for a name (an input-required result), then greets it."""
        answers = {k: v.model_dump(mode="json", by_alias=True) for k, v in (ctx.input_responses or {}).items()}
        seen.rounds.append((ctx.request_state, answers, ctx.client_capabilities))
        answer = (ctx.input_responses or {}).get("name")
        if isinstance(answer, types.ElicitResult) and ctx.request_state == SERVER_STATE and answer.content:
            return f"hello {answer.content.get('name')}"
        caps = ctx.client_capabilities
        if caps is not None and caps.elicitation is None:
            return "no elicitation declared"
        return types.InputRequiredResult(input_requests={"name": NAME_FORM}, request_state=SERVER_STATE)

    @server.tool()
    async def ask_anyway(ctx: Context) -> types.InputRequiredResult:
        """Asks for elicitation whatever the client declared."""
        return types.InputRequiredResult(input_requests={"name": NAME_FORM}, request_state=SERVER_STATE)

    return server


class ModernCaller:
    """A 2026-07-28 client of a call: takes no requests during it; declares ``declared``."""

    modern = True

    def __init__(self, declared: set[str], retry: InputRetry | None = None) -> None:
        self.declared, self.retry, self.principal = declared, retry, "client:test"
        self.logs: list[dict[str, Any]] = []

    def can(self, capability: str) -> bool:
        return False

    def declares(self, capability: str) -> bool:
        return capability in self.declared

    def capabilities(self) -> dict[str, Any]:
        return {"elicitation": {"form": {}}} if "elicitation.form" in self.declared else {}

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        raise AssertionError("a 2026-07-28 client is never sent a request during a call")

    async def log(self, params: dict[str, Any]) -> None:
        self.logs.append(params)


class ClassicCaller(ModernCaller):
    """A 2025-11-25 client: answers the elicitation it is sent during the call."""

    modern = False

    def __init__(self, declared: set[str], name: str) -> None:
        super().__init__(declared)
        self.name = name
        self.asked: list[tuple[str, dict[str, Any]]] = []

    def can(self, capability: str) -> bool:
        return capability in self.declared

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.asked.append((method, params))
        return types.ElicitResult(action="accept", content={"name": self.name})


async def _same(client: Any) -> Any:
    return client


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[Forwarding, Seen, Redactor]]:
    seen, redactor = Seen(), Redactor()
    async with Client(asking_server(seen)) as client:
        assert str(client.session.protocol_version) >= "2026"  # the server speaks 2026-07-28
        live = SimpleNamespace(
            status=SimpleNamespace(status="connected"),
            client=client,
            server=SimpleNamespace(title="Asker", qualified_name="io.example/asker"),
            inflight=InFlight(origin=Origin("asker", "Asker", "io.example/asker")),
            touch=lambda: None,
            classic=lambda _caller: _same(client),  # one 2026 session: the 2025 client's calls go on it too
        )
        forwarding = Forwarding(
            lambda _id: live, lambda: [live], redactor, ResourceLinks(), max_call_notifications=0, max_result_chars=0
        )
        yield forwarding, seen, redactor


async def test_a_2026_client_gets_the_question_labelled_and_its_retry_reaches_the_server_with_its_own_state(
    gateway: tuple[Forwarding, Seen, Redactor],
) -> None:
    forwarding, seen, _ = gateway
    first = await forwarding.call_tool("s1", "ask_name", {}, caller=ModernCaller({"elicitation.form"}))
    assert first["resultType"] == "input_required"
    question = first["inputRequests"]["name"]
    assert question["method"] == "elicitation/create"
    assert question["params"]["message"].startswith("Asker (installed server `asker`) asks:")
    assert question["params"]["_meta"][ORIGIN_KEY]["slug"] == "asker"
    assert first["requestState"] != SERVER_STATE  # the gateway's own, the server's inside

    retry = InputRetry({"name": {"action": "accept", "content": {"name": "Ada"}}}, first["requestState"])
    done = await forwarding.call_tool("s1", "ask_name", {}, caller=ModernCaller({"elicitation.form"}, retry))
    assert done.get("resultType", "complete") == "complete" and done["content"][0]["text"] == "hello Ada"
    assert seen.rounds[-1][0] == SERVER_STATE and seen.rounds[-1][1]["name"]["content"] == {"name": "Ada"}


async def test_a_changed_request_state_is_refused_and_never_reaches_the_server(
    gateway: tuple[Forwarding, Seen, Redactor],
) -> None:
    forwarding, seen, _ = gateway
    first = await forwarding.call_tool("s1", "ask_name", {}, caller=ModernCaller({"elicitation.form"}))
    body, mac = first["requestState"].rsplit(".", 1)
    answers = {"name": {"action": "accept", "content": {"name": "Ada"}}}
    for state in (body[:-2] + "AA." + mac, "made-up", SERVER_STATE):
        with pytest.raises(RequestStateInvalid):
            await forwarding.call_tool(
                "s1", "ask_name", {}, caller=ModernCaller({"elicitation.form"}, InputRetry(answers, state))
            )
    with pytest.raises(RequestStateInvalid):  # another tool's state
        retry = InputRetry(answers, first["requestState"])
        await forwarding.call_tool("s1", "ask_anyway", {}, caller=ModernCaller({"elicitation.form"}, retry))
    assert len(seen.rounds) == 1


async def test_a_2025_client_is_asked_during_the_call_and_the_call_completes_with_its_answer(
    gateway: tuple[Forwarding, Seen, Redactor],
) -> None:
    forwarding, seen, _ = gateway
    caller = ClassicCaller({"elicitation.form"}, "Grace")
    done = await forwarding.call_tool("s1", "ask_name", {}, caller=caller)
    assert done["content"][0]["text"] == "hello Grace"
    ((method, params),) = caller.asked
    assert method == "elicitation/create" and params["message"].startswith("Asker (installed server `asker`) asks:")
    assert [r[0] for r in seen.rounds] == [None, SERVER_STATE]

    with pytest.raises(ProtocolError, match="cannot give"):  # a client without elicitation is never asked
        await forwarding.call_tool("s1", "ask_anyway", {}, caller=ClassicCaller(set(), "nobody"))


async def test_the_server_is_told_the_clients_capabilities_and_a_question_it_did_not_declare_is_never_sent(
    gateway: tuple[Forwarding, Seen, Redactor],
) -> None:
    forwarding, seen, _ = gateway
    told = await forwarding.call_tool("s1", "ask_name", {}, caller=ModernCaller(set()))
    assert told["content"][0]["text"] == "no elicitation declared"
    assert seen.rounds[-1][2] is not None and seen.rounds[-1][2].elicitation is None

    with pytest.raises(ProtocolError, match="cannot give"):
        await forwarding.call_tool("s1", "ask_anyway", {}, caller=ModernCaller(set()))


async def test_an_answer_holding_a_stored_secret_reaches_the_server_redacted(
    gateway: tuple[Forwarding, Seen, Redactor], canary: str
) -> None:
    forwarding, seen, redactor = gateway
    redactor.register(canary, "[secret:OTHER_KEY]")
    first = await forwarding.call_tool("s1", "ask_name", {}, caller=ModernCaller({"elicitation.form"}))
    retry = InputRetry({"name": {"action": "accept", "content": {"name": f"x{canary}"}}}, first["requestState"])
    await forwarding.call_tool("s1", "ask_name", {}, caller=ModernCaller({"elicitation.form"}, retry))
    assert canary not in repr(seen.rounds)
    assert "[secret:OTHER_KEY]" in repr(seen.rounds[-1][1])


async def test_a_server_whose_question_waits_on_a_2025_clients_answer_counts_as_busy_for_the_idle_stop() -> None:
    """Between two rounds of the call nothing is in flight at the server, yet the call is not over:
    stopped now, its next round would reach a session that is gone."""
    seen, redactor = Seen(), Redactor()
    asked, answer = anyio.Event(), anyio.Event()

    class Slow(ClassicCaller):
        async def request(self, method: str, params: dict[str, Any]) -> Any:
            asked.set()
            await answer.wait()  # the person takes their time
            return await super().request(method, params)

    async with Client(asking_server(seen)) as client:
        inflight = InFlight(origin=Origin("asker", "Asker", "io.example/asker"))
        live = SimpleNamespace(
            status=SimpleNamespace(status="connected"),
            client=client,
            server=SimpleNamespace(title="Asker", qualified_name="io.example/asker"),
            inflight=inflight,
            touch=lambda: None,
            classic=lambda _caller: _same(client),
        )
        forwarding = Forwarding(
            lambda _id: live, lambda: [live], redactor, ResourceLinks(), max_call_notifications=0, max_result_chars=0
        )
        done: list[dict[str, Any]] = []

        async def call() -> None:
            done.append(await forwarding.call_tool("s1", "ask_name", {}, caller=Slow({"elicitation.form"}, "Ada")))

        with anyio.fail_after(scaled(20)):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                await asked.wait()
                assert inflight.busy()  # what the idle stop asks (LiveConnection.busy)
                answer.set()
    assert done[0]["content"][0]["text"] == "hello Ada" and not inflight.busy()
