"""The server the conformance parity test runs the suite against, directly and installed behind
the gateway: the tools, prompt and behaviour the suite's scenarios of the parity test call for
(``@modelcontextprotocol/conformance``'s server specification), on the SDK's ``MCPServer``,
speaking both eras.

* ``test_simple_text``, ``test_error_handling``: a text result, a tool error;
* ``test_sampling {prompt}``, ``test_elicitation {message}``: a 2025-era request to the client
  during the call (sampling, a form elicitation), its answer in the result;
* ``test_input_required_result_*`` and the prompt ``test_input_required_result_prompt``:
  2026-07-28 input-required results (one elicitation, one sampling, one roots request; a
  ``requestState`` echoed; all three at once; three rounds with an evolving state; a state the
  SDK's boundary seals, so a changed one is refused; only what the client declared).

Run: ``python tests/stub_server/conformance_server.py`` (stdio) or ``... --port PORT``
(streamable HTTP on 127.0.0.1).
"""

from __future__ import annotations

import json
import sys

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity

#: A fixed key for the sealed request states: the direct run and the installed one verify alike.
STATE_KEY = b"mcp-setup-conformance-stub-request-state-key-0001"

server = MCPServer(
    name="mcp-setup-conformance-stub", version="1.0.0", request_state_security=RequestStateSecurity(keys=[STATE_KEY])
)


def _form(message: str, field: str, kind: str = "string") -> types.ElicitRequest:
    schema = {"type": "object", "properties": {field: {"type": kind}}, "required": [field]}
    return types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))


def _sample(text: str, max_tokens: int) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def _content(answer: object, field: str) -> object:
    """``field`` of an accepted elicitation's content, or None."""
    if isinstance(answer, types.ElicitResult) and answer.content:
        return answer.content.get(field)
    return None


@server.tool()
def test_simple_text() -> str:
    """Answers a fixed text."""
    return "This is a simple text response for testing."


@server.tool()
def test_error_handling() -> str:
    """Always fails (a tool error)."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Asks the client's model (a 2025-era sampling request during the call)."""
    try:
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))
        result = await ctx.session.create_message(messages=[message], max_tokens=100)
    except Exception as exc:  # noqa: BLE001 - the result says it
        return f"Sampling not supported or error: {exc}"
    text = result.content.text if isinstance(result.content, types.TextContent) else "No response"
    return f"LLM response: {text}"


@server.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Asks the user (a 2025-era form elicitation during the call)."""
    schema = {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"]}
    try:
        result = await ctx.session.elicit_form(message=message, requested_schema=schema)
    except Exception as exc:  # noqa: BLE001 - the result says it
        return f"Elicitation not supported or error: {exc}"
    return f"User response: action={result.action}, content={json.dumps(result.content or {})}"


@server.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | types.InputRequiredResult:
    """One elicitation, then a greeting."""
    answer = (ctx.input_responses or {}).get("user_name")
    if answer is not None:
        return f"Hello, {_content(answer, 'name') or 'stranger'}!"
    return types.InputRequiredResult(input_requests={"user_name": _form("What is your name?", "name")})


@server.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | types.InputRequiredResult:
    """One sampling request, then the model's text."""
    answer = (ctx.input_responses or {}).get("capital_question")
    if answer is not None:
        content = getattr(answer, "content", None)
        return f"Model said: {content.text if isinstance(content, types.TextContent) else '?'}"
    return types.InputRequiredResult(
        input_requests={"capital_question": _sample("What is the capital of France?", 100)}
    )


@server.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | types.InputRequiredResult:
    """One roots request, then how many roots."""
    answer = (ctx.input_responses or {}).get("client_roots")
    if answer is not None:
        return f"Client exposed {len(answer.roots) if isinstance(answer, types.ListRootsResult) else 0} root(s)."
    return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})


@server.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | types.InputRequiredResult:
    """A confirmation whose retry must echo the state it was given."""
    if "confirm" in (ctx.input_responses or {}) and ctx.request_state == "request-state-nonce":
        return "state-ok: confirmation received"
    return types.InputRequiredResult(
        input_requests={"confirm": _form("Please confirm", "ok", "boolean")}, request_state="request-state-nonce"
    )


@server.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | types.InputRequiredResult:
    """An elicitation, a sampling and a roots request at once."""
    if {"user_name", "greeting", "client_roots"} <= (ctx.input_responses or {}).keys():
        return "All inputs received."
    return types.InputRequiredResult(
        input_requests={
            "user_name": _form("What is your name?", "name"),
            "greeting": _sample("Generate a greeting", 50),
            "client_roots": types.ListRootsRequest(),
        },
        request_state="multiple-inputs",
    )


@server.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | types.InputRequiredResult:
    """Three rounds, the state carrying what the earlier ones answered."""
    state = json.loads(ctx.request_state) if ctx.request_state else {"round": 0}
    answers = ctx.input_responses or {}
    if state.get("round") == 1 and "step1" in answers:
        return types.InputRequiredResult(
            input_requests={"step2": _form("Step 2: What is your favorite color?", "color")},
            request_state=json.dumps({"round": 2, "name": _content(answers["step1"], "name")}),
        )
    if state.get("round") == 2 and "step2" in answers:
        return f"{state.get('name')} likes {_content(answers['step2'], 'color')}."
    return types.InputRequiredResult(
        input_requests={"step1": _form("Step 1: What is your name?", "name")}, request_state=json.dumps({"round": 1})
    )


@server.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | types.InputRequiredResult:
    """A state the SDK seals: a changed one never reaches this handler."""
    if ctx.request_state is None:
        return types.InputRequiredResult(
            input_requests={"confirm": _form("Please confirm", "ok", "boolean")}, request_state="round-1"
        )
    return f"state-ok: {ctx.request_state}"


@server.tool()
async def test_input_required_result_capabilities(ctx: Context) -> types.InputRequiredResult:
    """Asks only what the client declared it can answer."""
    caps = ctx.client_capabilities
    requests: dict[str, types.InputRequest] = {}
    if caps is None or caps.sampling is not None:
        requests["sample"] = _sample("Say hello", 50)
    if caps is None or caps.elicitation is not None:
        requests["ask"] = _form("What is your name?", "name")
    return types.InputRequiredResult(input_requests=requests, request_state="capability-gated")


@server.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[types.PromptMessage] | types.InputRequiredResult:
    """A prompt that needs the user's context first (an input-required ``prompts/get``)."""
    answer = (ctx.input_responses or {}).get("user_context")
    if answer is not None:
        text = f"Use the following context: {_content(answer, 'context') or '?'}"
        return [types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))]
    return types.InputRequiredResult(
        input_requests={"user_context": _form("What context should the prompt use?", "context")}
    )


if __name__ == "__main__":
    if "--port" in sys.argv:
        port = int(sys.argv[sys.argv.index("--port") + 1])
        server.run(transport="streamable-http", host="127.0.0.1", port=port)
    else:
        server.run(transport="stdio")
