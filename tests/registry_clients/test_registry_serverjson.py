"""server.json → Detail: the required-keys rule over all real sample entries, plus hand-checked cases."""

from __future__ import annotations

from typing import Any

import pytest

from registry_clients.serverjson import parse_server_json
from tests.helpers.registry_fixtures import SAMPLE_FILES, load_fixture
from tests.helpers.registry_judge import expected_options

# The rule, written again from its text, lives in tests/helpers/registry_judge.py.


ALL_ENTRIES = [
    pytest.param(entry, id=f"{name.split('_')[0]}[{i}]")
    for name in SAMPLE_FILES
    for i, entry in enumerate(load_fixture(name))
]


@pytest.mark.parametrize("entry", ALL_ENTRIES)
def test_every_sample_entry_parses_and_its_required_keys_follow_the_rule(entry: dict) -> None:
    detail = parse_server_json(entry, source="official")
    got = [
        (
            opt.id,
            {
                k.name: {
                    "kind": k.kind,
                    "required": k.required,
                    "secret": k.secret,
                    "secret_guessed": k.secret_guessed,
                    "in_argv": k.in_argv,
                    "default": None if k.off_unless_set and not k.default else k.default,
                }
                for k in opt.required_keys
            },
        )
        for opt in detail.packages
    ]
    assert got == expected_options(entry)


# ---------------------------------------------------------------------------------------
# Hand-checked cases
# ---------------------------------------------------------------------------------------
def _entry(name: str, version: str | None = None, file: str = "servers_sample_2025-12-18.json") -> dict:
    for e in load_fixture(file):
        server = e.get("server", e)
        if server["name"] == name and (version is None or server["version"] == version):
            return e
    raise LookupError(name)


def _keys(opt) -> dict[str, Any]:
    return {k.name: k for k in opt.required_keys}


def test_a_secret_env_var_becomes_a_required_secret_env_key_with_a_template() -> None:
    detail = parse_server_json(_entry("io.github.domdomegg/airtable-mcp-server", "1.7.3", "seed.json"), source="local")
    npm = detail.packages[0]
    assert (npm.id, npm.type, npm.identifier, npm.version) == ("npm", "npm", "airtable-mcp-server", "1.7.3")
    assert npm.env == {"AIRTABLE_API_KEY": "{AIRTABLE_API_KEY}"}
    key = _keys(npm)["AIRTABLE_API_KEY"]
    assert (key.kind, key.secret, key.required, key.in_argv) == ("env", True, True, False)
    assert [p.type for p in detail.packages] == ["npm", "oci", "mcpb"]
    assert detail.packages[2].file_sha256 and detail.packages[2].identifier.endswith(".mcpb")
    assert detail.source == "local" and detail.repository_url.startswith("https://github.com/")


def test_an_env_var_named_like_a_key_is_secret_even_when_not_marked() -> None:
    detail = parse_server_json(_entry("io.github.21st-dev/magic-mcp", file="seed_2025-09-29.json"), source="official")
    key = _keys(detail.packages[0])["API_KEY"]
    assert (key.secret, key.required, key.kind) == (True, False, "env")


def test_a_templated_bearer_header_yields_one_secret_header_key_per_placeholder() -> None:
    detail = parse_server_json(_entry("ai.smithery/222wcnm-bilistalkermcp"), source="official")
    (remote,) = detail.packages
    assert (remote.id, remote.type, remote.transport) == ("remote", "remote", "streamable-http")
    assert remote.url == "https://server.smithery.ai/@222wcnm/bilistalkermcp/mcp" == remote.identifier
    assert remote.headers == {"Authorization": "Bearer {smithery_api_key}"}
    key = _keys(remote)["smithery_api_key"]
    assert (key.kind, key.secret, key.required) == ("header", True, True)
    assert detail.remote is True and detail.package_types == ["remote"]


def test_a_header_variable_declared_in_variables_carries_its_own_description() -> None:
    detail = parse_server_json(_entry("com.infobip/mcp"), source="official")
    assert [p.id for p in detail.packages][:3] == ["remote", "remote:2", "remote:3"]
    assert detail.packages[1].transport == "sse"
    key = _keys(detail.packages[0])["INFOBIP_API_KEY"]
    assert (key.kind, key.secret, key.required, key.description) == ("header", True, True, "Your Infobip API key")


def test_an_open_header_is_a_key_named_after_the_header() -> None:
    detail = parse_server_json(_entry("io.prisma/mcp"), source="official")
    remote = detail.packages[-1]
    assert remote.headers["Authorization"] == "{Authorization}"
    key = _keys(remote)["Authorization"]
    assert (key.kind, key.secret, key.required) == ("header", True, False)


def test_url_variables_of_a_remote_become_url_variable_keys() -> None:
    doc = {
        "name": "com.example/tenant",
        "version": "1.0.0",
        "remotes": [
            {
                "type": "streamable-http",
                "url": "https://{tenant}.example.com/mcp?region={region}",
                "variables": {
                    "tenant": {"description": "Your tenant", "isRequired": True},
                    "region": {"description": "Region", "default": "eu", "choices": ["eu", "us"]},
                },
            }
        ],
    }
    (remote,) = parse_server_json(doc, source="local").packages
    keys = _keys(remote)
    assert remote.url == "https://{tenant}.example.com/mcp?region={region}"
    assert (keys["tenant"].kind, keys["tenant"].required, keys["tenant"].description) == (
        "url_variable",
        True,
        "Your tenant",
    )
    assert (keys["region"].required, keys["region"].default, keys["region"].choices) == (False, "eu", ["eu", "us"])


def test_a_package_url_placeholder_reuses_the_argument_key_that_feeds_it() -> None:
    detail = parse_server_json(_entry("io.github.bytedance/mcp-server-commands"), source="official")
    assert [p.id for p in detail.packages] == ["npm", "npm:2", "npm:3"]
    sse = detail.packages[1]
    assert (sse.transport, sse.url, sse.version) == ("sse", "http://127.0.0.1:{port}/sse", "latest")
    assert list(_keys(sse)) == ["cwd", "port"]
    port = _keys(sse)["port"]
    assert (port.kind, port.required, port.default) == ("argument", True, "8089")
    assert [a.key for a in sse.package_arguments] == ["cwd", "port"]
    cwd = _keys(detail.packages[0])["cwd"]  # optional and open: a key the agent may fill, off unless set
    assert (cwd.required, cwd.off_unless_set, cwd.format) == (False, True, "string")


def test_package_url_placeholders_are_substituted_from_fixed_inputs_or_become_keys() -> None:
    doc = {
        "name": "com.example/local-http",
        "packages": [
            {
                "registryType": "npm",
                "identifier": "local-http",
                "transport": {
                    "type": "streamable-http",
                    "url": "http://localhost:{PORT}/{base_path}/mcp",
                    "headers": [{"name": "Authorization", "value": "Bearer {jwt}"}],
                },
                "environmentVariables": [{"name": "PORT", "value": "3000"}],
            }
        ],
    }
    (pkg,) = parse_server_json(doc, source="local").packages
    assert pkg.url == "http://localhost:3000/{base_path}/mcp"
    keys = _keys(pkg)
    assert set(keys) == {"jwt", "base_path"}
    assert (keys["jwt"].kind, keys["jwt"].secret, keys["jwt"].required) == (
        "header",
        True,
        True,
    )  # Authorization holds it
    assert (keys["base_path"].kind, keys["base_path"].secret) == ("url_variable", False)


def test_argument_variables_become_argument_keys_and_secret_ones_are_flagged_in_argv() -> None:
    detail = parse_server_json(_entry("com.knitli/codeweaver"), source="official")
    oci = next(p for p in detail.packages if p.type == "oci")
    keys = _keys(oci)
    assert (keys["workspace"].kind, keys["workspace"].required, keys["workspace"].secret) == ("argument", True, False)
    assert (keys["host_port"].required, keys["host_port"].default) == (False, "9328")
    assert "{workspace}:/workspace:ro" in [a.value for a in oci.runtime_arguments]  # (its --rm flag: docker run's own)

    mia = parse_server_json(_entry("io.github.mia-platform/console-mcp-server"), source="official").packages[0]
    secret = _keys(mia)["mia-platform-client-secret"]
    assert (secret.kind, secret.secret, secret.in_argv, secret.required) == ("argument", True, True, True)
    assert _keys(mia)["mia-platform-client-id"].secret is False


def test_a_required_open_secret_argument_is_a_key_named_after_the_flag() -> None:
    detail = parse_server_json(_entry("io.github.rfdez/pvpc-mcp-server", "3.2.3"), source="official")
    stdio, http = detail.packages
    key = _keys(stdio)["api-key"]
    assert (key.kind, key.secret, key.in_argv) == ("argument", True, True)
    assert [a.key for a in stdio.package_arguments] == [None, "api-key"]
    assert (http.transport, http.url, http.headers) == (
        "streamable-http",
        "http://127.0.0.1:8080/mcp",
        {"X-API-Key": "{X-API-Key}"},
    )


def test_an_env_var_with_a_value_keeps_it_and_only_its_placeholders_are_keys() -> None:
    sample = parse_server_json(_entry("com.joelverhagen.mcp/Knapcode.SampleMcpServer", "0.7.0-beta"), source="official")
    nuget = sample.packages[0]
    assert nuget.env == {"WEATHER_CHOICES": "{weather_choices}"}
    key = _keys(nuget)["weather_choices"]
    assert (key.kind, key.required, key.description) == (
        "env",
        True,
        "Comma separated list of weather descriptions to randomly select.",
    )
    dotnet = parse_server_json(_entry("io.github.jongalloway/dotnet-mcp"), source="official").packages[0]
    assert dotnet.env["DOTNET_SKIP_FIRST_TIME_EXPERIENCE"] == "1" and dotnet.required_keys == []


def test_real_data_quirks_are_tolerated() -> None:
    entries = load_fixture("servers_sample_2025-12-18.json")
    empty_repo = next(e for e in entries if e["server"].get("repository") == {})
    assert parse_server_json(empty_repo, source="official").repository_url is None
    no_version = next(e for e in entries if any("version" not in p for p in e["server"].get("packages", [])))
    assert any(p.version is None for p in parse_server_json(no_version, source="official").packages)
    blank_type = _entry("io.github.Memphora/memphora")
    args = parse_server_json(blank_type, source="official").packages[0].runtime_arguments
    assert args[0].type == "positional" and args[0].value == "-m"
    bare = parse_server_json({"name": "a/b"}, source="local")
    assert (bare.description, bare.version, bare.display_name, bare.packages) == ("", None, "a/b", [])


def test_the_2025_07_09_snake_case_format_and_unknown_types_are_read() -> None:
    doc = {
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-07-09/server.schema.json",
        "name": "io.example/snake",
        "description": "snake",
        "version": "0.1.0",
        "packages": [
            {
                "registry_type": "pypi",
                "identifier": "snake-mcp",
                "runtime_hint": "uvx",
                "transport": {"type": "stdio"},
                "environment_variables": [{"name": "SNAKE_PASS", "is_secret": True, "is_required": True}],
                "package_arguments": [{"type": "positional", "value_hint": "dir", "is_required": True}],
            },
            {"registry_type": "cargo", "identifier": "nope", "transport": {"type": "stdio"}},
        ],
    }
    (pypi,) = parse_server_json(doc, source="official").packages
    assert (pypi.type, pypi.runtime_hint) == ("pypi", "uvx")
    assert {k.name: (k.kind, k.secret, k.required) for k in pypi.required_keys} == {
        "SNAKE_PASS": ("env", True, True),
        "dir": ("argument", False, True),
    }


def test_a_document_without_a_name_is_rejected_with_value_error() -> None:
    with pytest.raises(ValueError, match="name"):
        parse_server_json({"description": "x"}, source="local")
