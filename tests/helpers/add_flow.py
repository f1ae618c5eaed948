"""A local catalog for ``mcp-setup add`` as a new user meets it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.stub_server.bundle import build_stub_bundle, stub_server_json


def make_catalog(root: Path, expected: str, *, mode: str = "", extra_env: dict[str, str] | None = None) -> Path:
    bundle, sha = build_stub_bundle(root / "dist", expected_value=expected, mode=mode, extra_env=extra_env)
    catalog = root / "catalog"
    catalog.mkdir(parents=True, exist_ok=True)
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha)))
    return catalog
