"""Issue #10, item 13: a failed URL elicitation is ``prompt_failed`` (not ``internal``), and the
secret page's URL, with its token, is written to no log."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.browser.serve import make_catalog
from tests.helpers.mcp_face import Recorder, call, face_env, mcp_setup_client
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("how", ["error_answer", "callback_raises"])
async def test_a_failed_url_elicitation_is_prompt_failed_and_logs_no_page_url(
    tmp_path: Path, canary: str, how: str
) -> None:
    catalog = make_catalog(tmp_path, canary)
    env = face_env(
        tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog), MCP_SETUP_LOG_LEVEL="DEBUG"
    )
    urls: list[str] = []

    async def failing(context: Any, params: Any) -> Any:
        urls.append(getattr(params, "url", ""))
        if how == "callback_raises":
            raise RuntimeError("the client's browser could not be opened")
        return types.ErrorData(code=-32603, message=f"could not open {params.url} in a browser")

    stderr = tmp_path / "err.log"
    with anyio.fail_after(scaled(60)):
        async with mcp_setup_client(tmp_path, stderr, Recorder(), elicitation_callback=failing, env=env) as client:
            asked = await call(client, "mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "Key?"})
            listed = await call(client, "mcp_setup_list_servers")
    assert urls and urls[0].startswith("http://127.0.0.1:")
    assert asked["ok"] is False and asked["error"]["code"] == "prompt_failed", asked
    assert listed["servers"] == []  # the face is still fine
    log = stderr.read_text()
    token = re.search(r"[?&]t=([^&]+)", urls[0]).group(1)  # type: ignore[union-attr]
    assert token not in log and urls[0] not in log
