"""A 2025-era installed server's requests during a call reach a 2026-07-28 client as input-required
results: the server's call is held in the gateway, the client's retry answers the waiting request
(guarded, redacted) and gets the call's result, or the server's next question. A client that never
retries has the server's request answered with an error, and the user is told. A real stub process
(tests/stub_server/asking.py, 2025-11-25 only) behind a real store, guard and gateway, and the MCP
face served in process to the SDK's 2026-07-28 client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError

from app.mcp.face import McpFace
from setup_agent.errors import RequestStateInvalid
from setup_agent.gateway.input_required import InputRetry
from tests.helpers.asking_gateway import ASK, FORM, ask, asking_gateway, face
from tests.helpers.asking_gateway import AskingGateway as Relayed
from tests.helpers.timeouts import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

#: Deliberately short: the tests that never retry want it to pass.
RETRY_WAIT = 0.5
ROOT = types.Root(uri="file:///work/project", name="project")


@pytest.fixture
async def relayed(tmp_path: Path, canary: str) -> AsyncIterator[Relayed]:
    async with asking_gateway(tmp_path, canary) as relayed:
        yield relayed


class Person:
    """A 2026-07-28 client's person: what they were shown, and how they answer."""

    def __init__(self, content: dict[str, Any] | None = None) -> None:
        self.content = content or {"colour": "blue"}
        self.elicited: list[dict[str, Any]] = []
        self.sampled: list[dict[str, Any]] = []
        self.roots = 0

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        self.elicited.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content=self.content)

    async def sample(self, context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self.sampled.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="ok"), model="m")

    async def list_roots(self, context: Any) -> types.ListRootsResult:
        self.roots += 1
        return types.ListRootsResult(roots=[ROOT])

    def client(self, served: McpFace) -> Client:
        return Client(  # auto: the face speaks 2026-07-28, so no requests during a call
            served.server,
            elicitation_callback=self.elicit,
            sampling_callback=self.sample,
            list_roots_callback=self.list_roots,
        )


async def test_a_2025_servers_form_reaches_a_2026_client_labelled_and_its_answer_completes_the_call(
    relayed: Relayed,
) -> None:
    person = Person()
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            assert str(client.session.protocol_version) >= "2026"
            answer = await ask(client, "elicitation/create", {"message": "Which colour?", "requestedSchema": FORM})
    assert answer["result"] == {"action": "accept", "content": {"colour": "blue"}}
    (asked,) = person.elicited
    assert asked["message"] == "Asking (installed server `asking`) asks: Which colour?"


async def test_the_input_required_result_carries_the_request_and_a_sealed_state_the_retry_is_matched_by(
    relayed: Relayed,
) -> None:
    with anyio.fail_after(scaled(30)):
        async with Person().client(face(relayed.gateway)) as client:
            arguments = {"method": "elicitation/create", "params": {"message": "Which?", "requestedSchema": FORM}}
            first = await client.session.call_tool(ASK, arguments, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            ((key, request),) = (first.input_requests or {}).items()
            assert isinstance(request, types.ElicitRequest)
            assert request.params.message == "Asking (installed server `asking`) asks: Which?"
            assert first.request_state and "ask-1" not in first.request_state  # the gateway's, not the server's

            changed = first.request_state[:-2] + ("00" if not first.request_state.endswith("00") else "11")
            with pytest.raises(MCPError) as refused:  # a state the client changed reaches nobody
                await client.session.call_tool(
                    ASK, arguments, input_responses={key: types.ElicitResult(action="decline")}, request_state=changed
                )
            assert refused.value.error.code == types.INVALID_PARAMS

            done = await client.session.call_tool(
                ASK,
                arguments,
                input_responses={key: types.ElicitResult(action="accept", content={"colour": "red"})},
                request_state=first.request_state,
            )
    assert isinstance(done, types.CallToolResult) and not done.is_error
    assert json.loads(done.content[0].text)["result"]["content"] == {"colour": "red"}  # type: ignore[union-attr]
    assert "decline" not in relayed.received()


async def test_a_server_that_asks_again_gets_a_further_input_required_round_scoped_as_every_relay(
    relayed: Relayed,
) -> None:
    person = Person()
    sampling = {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
        "maxTokens": 5,
        "includeContext": "allServers",
    }
    then = [{"method": "sampling/createMessage", "params": sampling}, {"method": "roots/list"}]
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            answer = await ask(client, "elicitation/create", {"message": "First?", "requestedSchema": FORM}, then=then)
    assert answer["result"]["content"] == {"colour": "blue"}
    sampled, listed = answer["then"]
    assert sampled["result"]["content"]["text"] == "ok"
    assert listed["result"]["roots"] == [{"uri": str(ROOT.uri), "name": ROOT.name}]
    (asked,) = person.sampled
    assert asked["includeContext"] == "none"
    assert person.roots == 1 and len(person.elicited) == 1


async def test_an_answer_holding_another_servers_stored_secret_never_reaches_the_2025_server(
    relayed: Relayed, canary: str
) -> None:
    person = Person({"colour": f"here it is: {canary}"})
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            answer = await ask(client, "elicitation/create", {"message": "Anything?", "requestedSchema": FORM})
    assert person.elicited  # the person answered
    assert "did not pass the answer on" in answer["error"]["message"]
    assert [incident.refusals for incident in relayed.guard.incidents()] == [1]  # counted like a tool argument
    assert canary not in relayed.received()
    assert "Anything?" in relayed.received()  # the record holds what the server was told


async def test_a_credential_form_is_refused_before_the_2026_client_is_asked(relayed: Relayed) -> None:
    person = Person()
    schema = {"type": "object", "properties": {"githubToken": {"type": "string"}}}
    with anyio.fail_after(scaled(30)):
        async with person.client(face(relayed.gateway)) as client:
            answer = await ask(client, "elicitation/create", {"message": "Token again", "requestedSchema": schema})
    assert person.elicited == []
    assert "refused this form" in answer["error"]["message"]
    assert relayed.told and "installed server `asking`" in relayed.told[0]


async def test_a_client_that_never_retries_leaves_the_server_an_error_and_the_user_told(
    tmp_path: Path, canary: str
) -> None:
    async with asking_gateway(tmp_path, canary, retry_wait=RETRY_WAIT) as relayed:
        with anyio.fail_after(scaled(30)):
            async with Person().client(face(relayed.gateway)) as client:
                arguments = {"method": "elicitation/create", "params": {"message": "Hello?", "requestedSchema": FORM}}
                first = await client.session.call_tool(ASK, arguments, allow_input_required=True)
                assert isinstance(first, types.InputRequiredResult)
                await relayed.heard.wait()  # given up: the server answered, its call ended, the user told
                (key,) = (first.input_requests or {}).keys()
                with pytest.raises(MCPError) as late:
                    await client.session.call_tool(
                        ASK,
                        arguments,
                        input_responses={key: types.ElicitResult(action="accept", content={"colour": "late"})},
                        request_state=first.request_state,
                    )
    assert late.value.error.code == types.INVALID_PARAMS and "no longer holds" in late.value.error.message
    (told,) = relayed.told
    assert "installed server `asking`" in told and "did not answer" in told
    answers = [json.loads(line) for line in relayed.received().splitlines() if '"ask-1"' in line]
    assert [a["error"]["message"] for a in answers if "error" in a] == [
        f"mcp-setup: the client did not call again with the answer within {RETRY_WAIT:g} seconds."
    ]
    assert "late" not in relayed.received()


class ModernCaller:
    """A 2026-07-28 client of a call as the relay sees it (the face's ``ClientCaller``): takes no
    request during the call, declares form elicitation, is ``principal``."""

    modern = True

    def __init__(self, principal: str, retry: InputRetry | None = None) -> None:
        self.principal, self.retry = principal, retry

    def can(self, capability: str) -> bool:
        return False

    def declares(self, capability: str) -> bool:
        return capability == "elicitation.form"

    def capabilities(self) -> dict[str, Any]:
        return {"elicitation": {"form": {}}}

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        raise AssertionError("a 2026-07-28 client is never sent a request during a call")

    async def log(self, params: dict[str, Any]) -> None:
        return None


async def test_a_retry_from_another_client_is_refused_and_the_call_waits_for_its_own_clients(
    relayed: Relayed,
) -> None:
    server_id = relayed.gateway.route(ASK).server.server_id
    arguments = {"method": "elicitation/create", "params": {"message": "Yours?", "requestedSchema": FORM}}
    forwarding = relayed.manager.forwarding
    with anyio.fail_after(scaled(30)):
        first = await forwarding.call_tool(server_id, "ask", arguments, caller=ModernCaller("token:ada"))
        assert first["resultType"] == "input_required"
        (key,) = first["inputRequests"]
        answer = {key: {"action": "accept", "content": {"colour": "bob's"}}}
        with pytest.raises(RequestStateInvalid, match="another client"):
            retry = InputRetry(answer, first["requestState"])
            await forwarding.call_tool(server_id, "ask", arguments, caller=ModernCaller("token:bob", retry))
        own = InputRetry({key: {"action": "accept", "content": {"colour": "ada's"}}}, first["requestState"])
        done = await forwarding.call_tool(server_id, "ask", arguments, caller=ModernCaller("token:ada", own))
    assert json.loads(done["content"][0]["text"])["result"]["content"] == {"colour": "ada's"}
    assert "bob's" not in relayed.received()


async def test_a_2025_servers_form_while_a_prompt_is_got_reaches_a_2026_client_and_its_answer_completes_the_prompt(
    relayed: Relayed, canary: str
) -> None:
    person = Person()
    served = face(relayed.gateway)
    arguments = {"method": "elicitation/create", "params": json.dumps({"message": "Which?", "requestedSchema": FORM})}
    with anyio.fail_after(scaled(30)):
        while "asking__ask" not in {p["name"] for p in await relayed.gateway.list_prompts()}:
            await anyio.sleep(0.05)  # the prompts are recorded just after the tools, at the same connect
        async with person.client(served) as client:
            first = await client.session.get_prompt("asking__ask", arguments, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            ((key, request),) = (first.input_requests or {}).items()
            assert isinstance(request, types.ElicitRequest)
            assert request.params.message == "Asking (installed server `asking`) asks: Which?"
            secret = {key: types.ElicitResult(action="accept", content={"colour": canary})}
            refused = await client.session.get_prompt(
                "asking__ask", arguments, input_responses=secret, request_state=first.request_state
            )
            # One prompt at a time: a server's request during one of two prompts in flight names
            # neither, so it would be refused rather than guessed (relay.py).
            got = await client.get_prompt("asking__ask", arguments)  # the SDK's own rounds, answered by the person
    answer = json.loads(got.messages[0].content.text)  # type: ignore[union-attr]
    assert answer["result"] == {"action": "accept", "content": {"colour": "blue"}}
    assert person.elicited and person.elicited[0]["message"].startswith("Asking (installed server `asking`)")
    assert "did not pass the answer on" in json.loads(refused.messages[0].content.text)["error"]["message"]  # type: ignore[union-attr]
    assert canary not in relayed.received()
