"""A consent for a remote server, opened on the one-time consent page."""

from __future__ import annotations

from registry_clients.models import RequiredKey
from setup_agent.launch.spec import LaunchSpec
from setup_agent.setup.consent import ConsentBroker, ConsentWarning, PendingConsent, build_consent_request


def open_remote(consents: ConsentBroker, *, warnings: bool = False) -> PendingConsent:
    spec = LaunchSpec(
        transport="streamable-http",
        url="https://${tenant_host}/mcp",
        headers={"Authorization": "Bearer ${TOKEN}"},
        package_type="remote",
        identifier="https://${tenant_host}/mcp",
    )
    keys = [
        RequiredKey(name="tenant_host", kind="url_variable", description="Your <b>tenant</b>"),
        RequiredKey(name="TOKEN", secret=True, kind="header"),
    ]
    warns = [ConsentWarning("argv_secret", "TOKEN would be visible in ps")] if warnings else []
    request = build_consent_request(
        server="io.test/remote",
        version="1.0",
        spec=spec,
        keys=keys,
        values={"tenant_host": "evil.example"},
        warnings=warns,
    )
    return consents.open(request)
