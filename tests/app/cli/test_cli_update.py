"""``mcp-setup update NAME``: a newer registry version is swapped in only when it answers
with the stored settings; otherwise the installed one stays and still works."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import anyio

from tests.fakes.file_server import serve_file
from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.mcp_face import face_env
from tests.helpers.updates import install_v1, installed, publish, run
from tests.stub_server.bundle import build_stub_bundle, stub_server_json


def test_update_swaps_in_a_version_that_answers_and_keeps_the_old_one_when_the_new_one_does_not(
    tmp_path: Path, canary: str
) -> None:
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    env = face_env(tmp_path, MCP_SETUP_REGISTRIES="local", MCP_SETUP_CATALOG_DIR=str(catalog))
    home = Path(env["MCP_SETUP_HOME"])
    publish(tmp_path, catalog, "1.0.0", canary)
    anyio.run(install_v1, home, catalog, canary)

    done = run(env, "update", "stub")
    assert done.returncode == 0 and "already at 1.0.0" in done.stdout

    publish(tmp_path, catalog, "2.0.0", canary)  # answers with the stored key
    done = run(env, "update", "stub", "--version", "9.9.9")
    assert done.returncode == 1 and "1.0.0 stays installed" in done.stderr
    # said once, without the registry's own sentence nested in it (#25 item 12)
    assert f"No version 9.9.9 of io.github.mcp-setup/stub in the local catalog ({catalog}); " in done.stderr
    assert done.stderr.count("9.9.9") == 1 and ".)" not in done.stderr
    done = run(env, "update", "stub")
    assert done.returncode == 0, done.stderr
    assert "from 1.0.0 to 2.0.0" in done.stdout and canary not in done.stdout + done.stderr
    [server] = installed(env)
    assert server["version"] == "2.0.0" and server["slug"] == "stub"
    kept_id = server["server_id"]

    publish(tmp_path, catalog, "3.0.0", "another-key-" + canary[::-1])  # rejects the stored key
    done = run(env, "update", "stub")
    assert done.returncode == 1 and "2.0.0 stays installed" in done.stderr
    assert canary not in done.stdout + done.stderr
    [server] = installed(env)
    assert (server["server_id"], server["version"]) == (kept_id, "2.0.0")
    doctor = json.loads(run(env, "doctor", "--json").stdout)
    assert next(c for c in doctor["checks"] if c["name"] == "server stub")["ok"] is True  # the old one still answers


def test_update_to_a_named_version_installs_exactly_that_version_from_the_official_registry(
    tmp_path: Path, canary: str
) -> None:
    entries, served = [], ExitStack()
    for version, expected in (("1.0.0", canary), ("1.5.0", canary), ("2.0.0", "another-key-" + canary[::-1])):
        bundle, sha = build_stub_bundle(tmp_path / f"dist-{version}", expected_value=expected)
        url = served.enter_context(serve_file(bundle))  # a remote registry may not name a file:// bundle
        entries.append(stub_server_json(url, sha, version=version))  # 2.0.0 is the latest
    with served, FakeOfficialRegistry(entries) as registry:
        env = face_env(tmp_path, MCP_SETUP_REGISTRIES="official", MCP_SETUP_OFFICIAL_REGISTRY_URL=registry.url)
        home = Path(env["MCP_SETUP_HOME"])
        anyio.run(lambda: install_v1(home, tmp_path, canary, official_url=registry.url, version="1.0.0"))
        [server] = installed(env)
        assert server["version"] == "1.0.0"
        kept_id = server["server_id"]

        done = run(env, "update", "stub", "--version", "9.9.9")  # the registry has no such version
        assert done.returncode == 1 and "1.0.0 stays installed" in done.stderr
        assert "No version 9.9.9 of io.github.mcp-setup/stub in the official registry; " in done.stderr
        done = run(env, "update", "stub", "--version", "2.0.0")  # rejects the stored key
        assert done.returncode == 1 and "1.0.0 stays installed" in done.stderr
        assert canary not in done.stdout + done.stderr
        [server] = installed(env)
        assert (server["server_id"], server["version"]) == (kept_id, "1.0.0")

        done = run(env, "update", "stub", "--version", "1.5.0")  # not the latest, and it answers
        assert done.returncode == 0, done.stderr
        assert "from 1.0.0 to 1.5.0" in done.stdout and canary not in done.stdout + done.stderr
        [server] = installed(env)
        assert (server["version"], server["slug"]) == ("1.5.0", "stub")
        assert "/v0.1/servers/io.github.mcp-setup%2Fstub/versions/1.5.0" in {r.raw_path for r in registry.requests}
