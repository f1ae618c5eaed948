"""A stub server installed into a data dir before ``mcp-setup serve`` starts."""

from __future__ import annotations

from tests.browser.serve import STUB, Served


def install_stub(served: Served, value: str) -> str:
    asked = served.rpc(
        "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Your stub key", "server": STUB}
    )
    prompt = asked["result"]
    with served.client() as http:
        answered = http.post(f"/api/secrets/{prompt['prompt_id']}", json={"value": value}, headers=served.headers())
    assert answered.status_code == 200
    installed = served.rpc(
        "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}}
    )
    assert installed["result"]["status"] == "connected", installed
    return installed["result"]["server_id"]
