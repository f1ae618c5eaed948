"""Launch specs hold templates; materialize binds them to masked values, fill fills them in memory only."""

from __future__ import annotations

import pytest

from setup_agent.errors import InvalidInput
from setup_agent.launch.spec import LaunchSpec, fill, materialize
from setup_agent.secrets import SecretValue


def test_templates_are_filled_and_dollars_escaped(canary: str) -> None:
    spec = LaunchSpec(command="npx", args=["-y", "pkg", "--price=$$5", "${REGION}"], env={"API_KEY": "${API_KEY}"})
    filled = fill(spec, {"API_KEY": canary, "REGION": "eu"})
    assert filled.args == ["-y", "pkg", "--price=$5", "eu"]
    assert filled.env == {"API_KEY": canary}
    assert spec.keys() == {"API_KEY", "REGION"}
    assert canary not in repr(filled)
    resolved = materialize(spec, {"API_KEY": SecretValue(canary), "REGION": "eu"})
    assert canary not in repr(resolved) and canary not in repr(resolved.values)


def test_a_missing_value_names_the_key() -> None:
    for bind in (materialize, fill):
        with pytest.raises(InvalidInput) as err:
            bind(LaunchSpec(command="x", env={"K": "${TOKEN}"}), {})
        assert "TOKEN" in err.value.message


def test_url_values_are_percent_encoded_but_headers_are_not() -> None:
    spec = LaunchSpec(
        transport="streamable-http",
        url="https://${HOST}/mcp?workspace=${WS}",
        headers={"Authorization": "Bearer ${TOKEN}"},
    )
    resolved = fill(spec, {"HOST": "tenant.example.com:8443", "WS": "a b/c&d", "TOKEN": "t/k+n"})
    assert resolved.url == "https://tenant.example.com:8443/mcp?workspace=a%20b%2Fc%26d"
    assert resolved.headers == {"Authorization": "Bearer t/k+n"}


def test_an_mcpb_spec_needs_its_install_dir() -> None:
    spec = LaunchSpec(command="python3", args=["${__dirname}/server.py"], needs_install_dir=True)
    for bind in (materialize, fill):
        with pytest.raises(InvalidInput):
            bind(spec, {})
    assert fill(spec, {}, dirname="/srv/x").args == ["/srv/x/server.py"]
    assert materialize(spec, {}, dirname="/srv/x").bundle_dir == "/srv/x"
