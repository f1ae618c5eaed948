"""A runtime whose local catalog lists remote servers behind the fake OAuth pair
(tests/fakes/oauth_server.py), shared by tests/setup_agent/oauth/test_oauth.py and tests/browser/test_oauth_browser.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from app.runtime import Runtime, build_runtime
from app.settings import Settings
from tests.fakes.oauth_server import OAuthPair, remote_server_json
from tests.helpers.timeouts import scaled

__all__ = ["NAME", "oauth_runtime"]

NAME = "io.test/notes"


@asynccontextmanager
async def oauth_runtime(
    tmp_path: Path, pair: OAuthPair, keyring: Any, *, sign_in_timeout: float, also: Sequence[str] = ()
) -> AsyncIterator[Runtime]:
    """A runtime over a catalog of :data:`NAME` (and the names in ``also``), all served by ``pair``."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "notes.json").write_text(json.dumps(remote_server_json(NAME, pair.mcp_url)))
    for name in also:
        (catalog / f"{name.rsplit('/', 1)[-1]}.json").write_text(json.dumps(remote_server_json(name, pair.mcp_url)))
    settings = Settings(
        home=tmp_path / "data", registries="local", catalog_dir=catalog, probe_timeout_seconds=scaled(20)
    )
    rt = build_runtime(settings, keyring_backend=keyring)
    rt.sign_ins.timeout = sign_in_timeout
    try:
        yield rt
    finally:
        await rt.aclose()
