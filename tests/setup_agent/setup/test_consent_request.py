"""The consent as one document (consent_request.py's ``consent_document``): who asked, the person's
settings first, one sandbox block, the package's internals folded under "Technical details",
every template in words. The faces' texts are tested beside them (the consent page, ``mcp-setup
approve``, the page's modal in the browser)."""

from __future__ import annotations

import json

from registry_clients.models import RequiredKey
from setup_agent.launch.spec import LaunchSpec
from setup_agent.principals import asker_words
from setup_agent.setup import ConsentRequest, budget_line, build_consent_request, consent_document

SPEC = LaunchSpec(
    command="python3",
    args=["${__dirname}/server/server.py", "--notes", "${NOTES_DIR}", "--url", "{API_URL}"],
    package_type="mcpb",
    identifier="io.test/notes",
    version="1.0.0",
    file_sha256="ab" * 32,
    env={
        "NOTES_KEY": "${NOTES_KEY}",
        "STUB_EXPECTED_SHA256": "cd" * 32,  # the bundle's own: no setting of the person's
        "STUB_MODE": "",
        "FROM_INPUT": "${input:API_URL}",
        "FROM_BUNDLE": "${user_config.NOTES_DIR}",
    },
)
KEYS = [
    RequiredKey(name="NOTES_KEY", secret=True),
    RequiredKey(name="NOTES_DIR"),
    RequiredKey(name="API_URL"),
]


def _request(**more: object) -> ConsentRequest:
    return build_consent_request(
        server="io.test/notes",
        version="1.0.0",
        spec=SPEC,
        keys=KEYS,
        values={"NOTES_DIR": "/home/me/notes", "API_URL": "https://api.example.com", "NOTES_KEY": "never-shown"},
        action="install",
        sandbox="bwrap",
        net_mechanism="bwrap-netns",
        **more,  # type: ignore[arg-type]
    )


def test_the_document_names_the_asker_and_puts_the_persons_settings_first_and_the_internals_last_folded() -> None:
    doc = consent_document(_request(asker="Claude Desktop"))
    assert doc.title == "Allow mcp-setup to install io.test/notes?"
    assert doc.asked == "Claude Desktop asked to install io.test/notes."
    keys = [s.key for s in doc.sections]
    assert keys[0] == "settings" and keys[-1] == "technical"
    assert keys == ["settings", "runs", "sandbox", "network", "technical"]  # no tools: nothing was tested
    assert [s.key for s in doc.sections if s.folded] == ["technical"]
    settings = {line.label: line.text for line in doc.sections[0].lines}
    assert set(settings) == {"NOTES_KEY", "NOTES_DIR", "API_URL"}  # the bundle's own variables are not the person's
    assert settings["NOTES_DIR"] == "/home/me/notes" and settings["NOTES_KEY"].startswith("your secret")


def test_one_sandbox_block_with_no_repeated_label_and_the_network_said_once() -> None:
    doc = consent_document(_request())
    sandbox = doc.section("sandbox")
    network = doc.section("network")
    assert sandbox is not None and network is not None
    assert all(line.label == "" for line in sandbox.lines)
    assert not any(line.text.startswith(("Sandbox:", "Network:")) for line in sandbox.lines)
    assert "Held by bwrap." in [line.text for line in sandbox.lines]
    assert not any(line.text.startswith("Network") for line in network.lines)
    assert any(line.text.startswith("Its own, out only through mcp-setup's proxy") for line in network.lines)


def test_every_template_is_resolved_into_words_and_a_secret_value_is_never_shown() -> None:
    doc = consent_document(_request())
    text = json.dumps(doc.public())
    for raw in ("${", "{API_URL}", "input:", "user_config", "__dirname"):
        assert raw not in text
    assert "never-shown" not in text
    technical = {line.label: line.text for line in doc.sections[-1].lines}
    assert technical["Command line"] == (
        "python3 <its own folder>/server/server.py --notes /home/me/notes --url https://api.example.com"
    )
    assert "NOTES_KEY=<your NOTES_KEY>" in technical["Environment"]
    assert "FROM_BUNDLE=/home/me/notes" in technical["Environment"]
    assert "STUB_EXPECTED_SHA256=" + "cd" * 32 in technical["Environment"]  # internals, folded


def test_an_update_the_person_asked_for_says_you_asked_to_update() -> None:
    doc = consent_document(_request(asker=asker_words("ui"), update=True))
    assert doc.title == "Allow mcp-setup to update io.test/notes?"
    assert doc.asked == "You asked to update io.test/notes."


def test_the_asker_is_named_as_a_person_knows_it() -> None:
    assert asker_words("cli") == "You"
    assert asker_words("user:terminal") == "You"
    assert asker_words("mcp:claude-desktop") == "Claude Desktop"
    assert asker_words("mcp:claude-code") == "Claude Code"
    assert asker_words("mcp") == "An AI client"
    assert asker_words("agent") == "The setup assistant"
    assert asker_words("client:stdio via cursor") == "Cursor"


def test_a_test_that_covers_the_install_says_so_and_is_approved_under_the_same_fingerprint() -> None:
    test = build_consent_request(
        server="io.test/notes",
        version="1.0.0",
        spec=SPEC,
        keys=KEYS,
        values={"NOTES_DIR": "/home/me/notes", "API_URL": "https://api.example.com"},
        action="test",
        asker="Claude Code",
        covers_install=True,
    )
    install = build_consent_request(
        server="io.test/notes",
        version="1.0.0",
        spec=SPEC,
        keys=KEYS,
        values={"NOTES_DIR": "/home/me/notes", "API_URL": "https://api.example.com"},
        action="install",
    )
    doc = consent_document(test)
    assert doc.asked == "Claude Code asked to install io.test/notes."
    assert "no second question" in doc.intro
    assert test.fingerprint == install.fingerprint  # the words change, not what is approved


def test_the_tools_a_test_listed_are_a_section_and_the_document_survives_the_trip_through_the_store() -> None:
    tools = [{"name": "echo", "description": "Echo the text back.", "inputSchema": {"type": "object"}}]
    request = _request(tools=tools)
    doc = consent_document(request)
    section = doc.section("tools")
    assert section is not None and section.lines[0].label == "echo"
    shown = request.public()
    assert shown["document"] == doc.public()
    again = ConsentRequest.from_public(json.loads(json.dumps(shown)))  # another process shows it
    assert consent_document(again) == doc and again.fingerprint == ""


def test_a_secret_a_bundle_names_by_an_alias_is_among_the_persons_settings_under_its_own_name() -> None:
    spec = LaunchSpec(
        command="python3",
        args=["${__dirname}/server.py"],
        package_type="mcpb",
        identifier="io.test/weather",
        env={"WEATHER_API_KEY": "${api_key}"},
    )
    request = build_consent_request(
        server="io.test/weather",
        version="1.2.0",
        spec=spec,
        keys=[RequiredKey(name="WEATHER_API_KEY", secret=True, aliases=["api_key"])],
        values={},
    )
    doc = consent_document(request)
    assert [line.label for line in doc.sections[0].lines] == ["WEATHER_API_KEY"]
    assert "environment variable WEATHER_API_KEY" in doc.sections[0].lines[0].text
    technical = {line.label: line.text for line in doc.sections[-1].lines}
    assert technical["Environment"] == "WEATHER_API_KEY=<your WEATHER_API_KEY>"


BIG_TOOL = {"name": "search", "description": "Find things. " * 100, "inputSchema": {"type": "object"}}


def test_the_tools_section_ends_with_where_the_servers_tools_leave_the_context_budget() -> None:
    request = _request(tools=[BIG_TOOL], budget={"budget": 8000, "listed": 4900})
    adds = request.tools[0]["estimated_tokens"]
    section = consent_document(request).section("tools")
    assert section is not None
    assert section.lines[-1].label == "" and section.lines[-1].text == (
        f"Its tools add about {adds:,} tokens to what your AI clients are listed: {4900 + adds:,} of your budget "
        "of 8,000 tokens."
    )
    assert (
        budget_line(request, lead=False)
        == f"With them, AI clients are listed {4900 + adds:,} of your budget of 8,000 tokens."
    )


def test_past_the_budget_the_consent_says_its_tools_are_reached_through_find_tools() -> None:
    request = _request(tools=[BIG_TOOL], budget={"budget": 8000, "listed": 7900})
    line = budget_line(request)
    assert "of your budget of 8,000 tokens. Past the budget, AI clients are listed the tools used most recently" in line
    assert line.endswith("are reached through mcp_setup_find_tools.")


def test_the_budget_line_is_words_only_not_part_of_what_is_approved() -> None:
    plain = _request(tools=[BIG_TOOL])
    budgeted = _request(tools=[BIG_TOOL], budget={"budget": 8000, "listed": 4900})
    assert budget_line(plain) == "" and budgeted.fingerprint == plain.fingerprint
    again = ConsentRequest.from_public(json.loads(json.dumps(budgeted.public())))  # another process shows it
    assert budget_line(again) == budget_line(budgeted)
    assert budget_line(_request(budget={"budget": 8000, "listed": 4900})) == ""  # no tools known yet: nothing to say
