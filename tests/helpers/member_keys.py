"""A catalog whose server takes a per-member key, the pending link of a member's prompt, and the key's hash."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from tests.stub_server.bundle import build_stub_bundle, stub_server_json

KEY_HASH = re.compile(r"sha256=([0-9a-f]{64}) run=([0-9a-f]{16})")


def member_catalog(root: Path) -> Path:
    """The stub bundle with its ``key_hash`` tool and no expected value (any member's key starts it)."""
    bundle, sha = build_stub_bundle(root / "dist", expected_value=None, mode="key_hash")
    catalog = root / "catalog"
    catalog.mkdir(parents=True, exist_ok=True)
    (catalog / "stub.json").write_text(json.dumps(stub_server_json(bundle.resolve().as_uri(), sha)))
    return catalog


def sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def pending_link(result: dict[str, Any]) -> str:
    """A member not asked yet: a tool error with its code, and the secret link (nothing else)."""
    assert result.get("isError") is True, result
    error = result["structuredContent"]["error"]
    assert error["code"] == "member_secret_required" and error["key_name"] == "STUB_API_KEY"
    assert "approval" not in json.dumps(result) and "/consents/" not in json.dumps(result)
    return error["url"]


#: A ``key_hash`` answer of a stub with a second key: (its own key's sha256, its run id, the second key's sha256).
KEY_HASHES = re.compile(r"sha256=([0-9a-f]{64}) run=([0-9a-f]{16}) second=([0-9a-f]{64})")


def shared_key_catalog(root: Path, names: tuple[str, ...], second_key: str) -> Path:
    """One stub bundle per qualified name in ``names``, each with its ``key_hash`` tool, STUB_API_KEY
    (to be kept per member) and ``second_key`` (a shared one), both secret."""
    catalog = root / "catalog"
    catalog.mkdir(parents=True, exist_ok=True)
    for n, name in enumerate(names):
        short = name.rsplit("/", 1)[-1]
        bundle, digest = build_stub_bundle(
            root / "dist", expected_value=None, mode="key_hash", name=short, second_key=second_key
        )
        entry = stub_server_json(bundle.resolve().as_uri(), digest, name=name, second_key=second_key)
        (catalog / f"server-{n}.json").write_text(json.dumps(entry))
    return catalog
