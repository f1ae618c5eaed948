"""Serving a team: ``serve --host`` needs TLS off loopback, named bearer tokens (create, list,
revoke: refused at once by every instance), provenance ``token:<name>``, the public Host name."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import re
import selectors
import signal
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from app.cli.team import run_token
from app.settings import Settings
from setup_agent.secrets.vault import Vault
from setup_agent.store.database import Store
from tests.browser.serve import STUB, Served, make_catalog, stop_serve
from tests.mcp_face import REPO, face_env, mcp_setup_argv
from tests.timeouts import scaled

URL_LINE = re.compile(r"(https?)://([^/\s]+):(\d+)/\?t=([A-Za-z0-9_\-]+)")


# --- the token CLI -----------------------------------------------------------------------


def token_cli(settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    args = argparse.Namespace(token_command=argv[0], name=argv[1] if len(argv) > 1 else None)
    code = run_token(settings, args)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_token_is_printed_once_stored_only_as_a_hash_listed_by_name_and_revoked(
    tmp_path: Path, database_url: str | None, capsys: pytest.CaptureFixture[str], memory_keyring
) -> None:
    key = tmp_path / "team.key"
    Vault.in_memory().export_key(key)
    settings = Settings(home=tmp_path / "data", database_url=database_url, data_key_file=key)
    code, out, _ = token_cli(settings, capsys, "create", "alice")
    assert code == 0
    token = out.split()[0]
    assert token.startswith("mcps_") and len(token) > 40

    with Store.for_data_dir(settings.home, Vault.from_key_file(key), database_url) as store:
        with store.database.engine.connect() as conn:
            rows = conn.execute(text("SELECT name, token_hash FROM mcp_tokens")).all()
        assert [r[0] for r in rows] == ["alice"] and token not in rows[0][1]
        other_instance = store.tokens
        assert other_instance.verify(token) == "alice"
        assert other_instance.verify(token + "x") is None

        code, out, _ = token_cli(settings, capsys, "create", "alice")
        assert code == 1  # an active name is not replaced silently

        code, out, _ = token_cli(settings, capsys, "list")
        assert code == 0 and "alice" in out and "active" in out and token not in out

        code, out, _ = token_cli(settings, capsys, "revoke", "alice")
        assert code == 0
        assert other_instance.verify(token) is None  # at once, for every instance on the database
        code, out, _ = token_cli(settings, capsys, "list")
        assert "revoked" in out
        code, _, err = token_cli(settings, capsys, "revoke", "alice")
        assert code == 1 and "No active token" in err and "Traceback" not in err


def test_a_bad_token_name_is_refused_with_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "team.key"
    Vault.in_memory().export_key(key)
    settings = Settings(home=tmp_path / "data", data_key_file=key)
    code, _, err = token_cli(settings, capsys, "create", "no spaces please")
    assert code == 1 and "letters, digits" in err


# --- serve --host ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["--host", "0.0.0.0"], ["--host", "::"], ["--host", "0.0.0.0", "--tls-cert", "x.pem"]],
    ids=["ipv4", "ipv6", "cert-without-key"],
)
def test_serve_on_a_non_loopback_address_refuses_to_start_without_tls(
    tmp_path: Path, args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    proc = subprocess.run(
        mcp_setup_argv("serve", "--no-browser", "--port", "0", *args),
        env=face_env(tmp_path),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert proc.returncode == 2
    assert "--tls-cert" in proc.stderr and "Traceback" not in proc.stderr
    assert "running at" not in proc.stdout
    assert not (tmp_path / "data").exists()  # refused before touching anything


def start(root: Path, *args: str, timeout: float = scaled(30), **env: str) -> tuple[Served, str]:
    """``mcp-setup serve`` with ``args``; returns it and the scheme of its printed URL."""
    full_env = face_env(root, MCP_SETUP_REGISTRIES="local", PYTHONUNBUFFERED="1", **env)
    stderr_path = root / "serve-stderr.log"
    with open(stderr_path, "ab") as errlog:
        proc = subprocess.Popen(
            mcp_setup_argv("serve", "--no-browser", "--port", "0", *args),
            stdout=subprocess.PIPE,
            stderr=errlog,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=str(REPO),
        )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not sel.select(remaining):
                proc.kill()
                raise AssertionError(f"serve printed no URL in {timeout}s: {stderr_path.read_text()}")
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                raise AssertionError(f"serve exited ({proc.wait(scaled(5))}): {stderr_path.read_text()}")
            buf += chunk
            *done, buf = buf.split(b"\n")
            for line in done:
                lines.append(line.decode())
                match = URL_LINE.search(lines[-1])
                if match:
                    scheme, host, port, token = match.groups()
                    served = Served(proc, match.group(0), int(port), token, root, full_env, stderr_path, lines)
                    return served, scheme


def self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.fixture
def stopper() -> Iterator[list[Served]]:
    started: list[Served] = []
    yield started
    for served in started:
        stop_serve(served, signal.SIGTERM)


def test_insecure_http_off_loopback_is_warned_on_start_and_the_public_host_is_accepted(
    tmp_path: Path, stopper: list[Served]
) -> None:
    served, scheme = start(tmp_path, "--host", "0.0.0.0", "--insecure-http", MCP_SETUP_PUBLIC_HOST="team.example")
    stopper.append(served)
    assert scheme == "http" and served.url.startswith(f"http://team.example:{served.port}/?t=")
    with httpx.Client(base_url=f"http://127.0.0.1:{served.port}", trust_env=False, timeout=scaled(30)) as http:
        assert (
            http.get("/", params={"t": served.token}, headers={"Host": f"team.example:{served.port}"}).status_code
            == 200
        )
        assert http.get("/", params={"t": served.token}, headers={"Host": "team.example"}).status_code == 200
        assert (
            http.get("/", params={"t": served.token}, headers={"Host": f"evil.example:{served.port}"}).status_code
            == 421
        )
    assert "--insecure-http" in served.stderr() and "WARNING" in served.stderr()


def test_a_team_gateway_over_tls_serves_named_tokens_records_their_provenance_and_drops_a_revoked_one(
    tmp_path: Path, database_url: str | None, canary: str, stopper: list[Served]
) -> None:
    cert, key = self_signed(tmp_path, "team.example")
    data_key = tmp_path / "team.key"
    Vault.in_memory().export_key(data_key)
    env = {"MCP_SETUP_PUBLIC_HOST": "team.example", "MCP_SETUP_DATA_KEY_FILE": str(data_key)}
    if database_url:
        env["MCP_SETUP_DATABASE_URL"] = database_url
    env["MCP_SETUP_CATALOG_DIR"] = str(make_catalog(tmp_path, canary))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:  # another process: an admin's terminal
        return subprocess.run(
            mcp_setup_argv(*args),
            env=face_env(tmp_path, **env),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )

    created = cli("token", "create", "alice")
    assert created.returncode == 0, created.stderr
    token = created.stdout.split()[0]
    served, scheme = start(tmp_path, "--host", "0.0.0.0", "--tls-cert", str(cert), "--tls-key", str(key), **env)
    stopper.append(served)
    assert scheme == "https" and served.url.startswith(f"https://team.example:{served.port}/")
    bearer = {"Authorization": f"Bearer {token}", "Host": f"team.example:{served.port}"}
    tls = ssl.create_default_context(cafile=str(cert))
    with httpx.Client(
        base_url=f"https://127.0.0.1:{served.port}", verify=tls, trust_env=False, timeout=scaled(60)
    ) as http:

        def rpc(method: str, params: dict, headers: dict[str, str] = bearer) -> httpx.Response:
            return http.post(
                "/rpc", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, headers=headers
            )

        page = http.get("/", params={"t": served.token}, headers={"Host": f"team.example:{served.port}"})
        assert page.status_code == 200 and "secure" in page.headers["set-cookie"].lower()

        asked = rpc("mcp_setup_request_secret", {"key_name": "STUB_API_KEY", "prompt": "key", "server": STUB}).json()
        assert "result" in asked, asked
        prompt = asked["result"]
        assert prompt["url"].startswith(f"https://team.example:{served.port}/secrets/")
        answered = http.post(f"/api/secrets/{prompt['prompt_id']}", json={"value": canary}, headers=bearer)
        assert answered.status_code == 200
        installed = rpc(
            "mcp_setup_install_and_connect", {"qualified_name": STUB, "env_refs": {"STUB_API_KEY": prompt["ref"]}}
        )
        assert installed.json()["result"]["status"] == "connected", installed.text
        listed = rpc("servers.list", {}).json()["result"]["servers"]
        assert [s["installed_by"] for s in listed] == ["token:alice"]

        assert rpc("servers.list", {}, {**bearer, "Authorization": "Bearer mcps_wrong"}).status_code == 403
        revoked = cli("token", "revoke", "alice")
        assert revoked.returncode == 0, revoked.stderr
        refused = rpc("servers.list", {})
        assert refused.status_code == 403 and "revoked" in refused.text  # at once, no restart
    stderr = served.stderr()
    assert canary not in stderr and token not in stderr and "Traceback" not in stderr


# --- the key CLI -------------------------------------------------------------------------


def test_key_export_then_rotate_through_the_cli_keeps_every_value_readable_with_the_rotated_file(
    tmp_path: Path, database_url: str | None, canary: str
) -> None:
    env = face_env(tmp_path, **({"MCP_SETUP_DATABASE_URL": database_url} if database_url else {}))
    home = Path(env["MCP_SETUP_HOME"])

    def cli(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            mcp_setup_argv(*args), env={**env, **extra}, cwd=REPO, capture_output=True, text=True, timeout=scaled(60)
        )

    team_key = tmp_path / "exported.key"
    exported = cli("key", "export", "--to", str(team_key))  # the machine's own key, for the team
    assert exported.returncode == 0, exported.stderr
    assert oct(team_key.stat().st_mode & 0o777) == "0o600"
    with Store.for_data_dir(home, Vault.from_key_file(team_key), database_url) as store:
        server = store.servers.install(
            qualified_name="io.test/kept",
            source="local",
            version="1",
            package_type="npm",
            launch_spec={"command": "x"},
            installed_by="agent",
            tools_hash="h",
            env={"API_KEY": (canary, True)},
        )
    before = team_key.read_bytes()
    rotated = cli("key", "rotate", MCP_SETUP_DATA_KEY_FILE=str(team_key))
    assert rotated.returncode == 0, rotated.stderr
    assert "Re-encrypted 1 stored value" in rotated.stdout
    assert team_key.read_bytes() != before and oct(team_key.stat().st_mode & 0o777) == "0o600"
    with Store.for_data_dir(home, Vault.from_key_file(team_key), database_url) as store:
        assert store.values.env_values(server.server_id)["API_KEY"].reveal() == canary
    assert canary not in rotated.stdout + rotated.stderr

    team_key.chmod(0o644)
    refused = cli("key", "rotate", MCP_SETUP_DATA_KEY_FILE=str(team_key))
    assert refused.returncode == 1 and "chmod 600" in refused.stderr and "Traceback" not in refused.stderr


def test_serve_with_a_missing_or_loose_team_key_says_so_in_one_line(tmp_path: Path) -> None:
    loose = tmp_path / "loose.key"
    Vault.in_memory().export_key(loose)
    loose.chmod(0o640)
    for key_file, expected in ((tmp_path / "missing.key", "key export --to"), (loose, "chmod 600")):
        proc = subprocess.run(
            mcp_setup_argv("serve", "--no-browser", "--port", "0"),
            env=face_env(tmp_path, MCP_SETUP_DATA_KEY_FILE=str(key_file)),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert proc.returncode == 1 and expected in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and "running at" not in proc.stdout


@pytest.mark.parametrize(
    ("given", "base"),
    [
        ("https://Team.Example", "https://team.example"),
        ("https://team.example:443/", "https://team.example"),
        ("https://team.example:8443", "https://team.example:8443"),
        ("http://10.0.0.5:80", "http://10.0.0.5"),
        ("https://[::1]:9443", "https://[::1]:9443"),
        ("team.example", None),
        ("ftp://team.example", None),
        ("https://team.example/mcp", None),
        ("https://user:pw@team.example", None),
        ("https://team.example:port", None),
        ("https://", None),
    ],
)
def test_the_public_url_is_a_scheme_and_a_host_and_a_default_port_is_left_out(given: str, base: str | None) -> None:
    from app.web.serve import parse_public_url

    assert parse_public_url(given) == base


def test_serve_refuses_a_public_url_that_is_not_an_address_and_says_what_one_looks_like(tmp_path: Path) -> None:
    done = subprocess.run(
        mcp_setup_argv("serve", "--no-browser", "--port", "0"),
        cwd=REPO,
        capture_output=True,
        text=True,
        env=face_env(tmp_path, MCP_SETUP_PUBLIC_URL="team.example/x"),
        timeout=scaled(60),
    )
    assert done.returncode == 2
    assert "MCP_SETUP_PUBLIC_URL" in done.stderr and "https://team.example:8443" in done.stderr
