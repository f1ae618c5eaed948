"""Starting ``mcp-setup serve`` for a team, and a self-signed certificate for it."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import selectors
import subprocess
import time
from pathlib import Path

from tests.browser.serve import Served
from tests.helpers.mcp_face import REPO, face_env, mcp_setup_argv
from tests.helpers.timeouts import scaled

URL_LINE = re.compile(r"(https?)://([^/\s]+):(\d+)/\?t=([A-Za-z0-9_\-]+)")


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
