"""A one-package npm registry on loopback that can serve its tarball slowly.

It answers the two requests ``npm exec``/``npx`` make for a package: the packument
(``GET /<name>``) and the tarball (``GET /<name>/-/<name>-<version>.tgz``). With
``trickle_seconds`` the tarball is sent in pieces spread over that long, like a first
download on a slow network (#17 item 3: a download longer than the probe's deadline).

With ``token`` it is a private registry: the package (its tarball, and its packument too with
``private_packument``) is served only to ``Authorization: Bearer <token>``, anything else answers
401; ``authorizations`` lists every Authorization header it received.

The package it serves (:func:`stub_npm_package`) is the stdio stub server behind a small
Node launcher (``bin.js`` runs ``python3 server.py`` with stdio inherited).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.fakes.loopback import TrickleHandler, serve_loopback
from tests.stub_server.bundle import SERVER_PY

__all__ = ["NpmRegistry", "serve_npm_package", "stub_npm_package"]

LAUNCHER = """#!/usr/bin/env node
const { spawn } = require("child_process");
const child = spawn("python3", [__dirname + "/server.py"], { stdio: "inherit" });
child.on("exit", (code) => process.exit(code === null ? 1 : code));
process.on("SIGTERM", () => child.kill("SIGTERM"));
"""


def _bins(name: str, bins: dict[str, str] | None) -> dict[str, str]:
    """The package's commands: one named like it (without its scope, as npm names a scoped
    package's bin), the launcher; and ``bins``."""
    return {name.rsplit("/", 1)[-1]: "bin.js", **{cmd: f"bin-{cmd}.sh" for cmd in bins or {}}}


def stub_npm_package(
    name: str,
    version: str,
    scripts: dict[str, str] | None = None,
    bins: dict[str, str] | None = None,
    dependencies: dict[str, str] | None = None,
) -> bytes:
    """A gzipped npm tarball: package.json with a bin (and ``scripts``, ``dependencies``), the
    launcher, the stub server; ``bins`` adds more commands (name → a shell script's text)."""
    manifest: dict[str, object] = {"name": name, "version": version, "bin": _bins(name, bins)}
    if scripts:
        manifest["scripts"] = scripts
    if dependencies:
        manifest["dependencies"] = dependencies
    files = {
        "package/package.json": json.dumps(manifest).encode(),
        "package/bin.js": LAUNCHER.encode(),
        "package/server.py": SERVER_PY.read_bytes(),
        **{f"package/bin-{cmd}.sh": text.encode() for cmd, text in (bins or {}).items()},
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            info.mode = 0o755 if path.endswith((".js", ".py", ".sh")) else 0o644
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@dataclass
class NpmRegistry:
    url: str
    #: How many times the tarball was asked for (a warm cache asks no more).
    tarball_requests: list[str] = field(default_factory=list)
    #: Every ``Authorization`` header it received, in order.
    authorizations: list[str] = field(default_factory=list)
    #: Every request's path, in order.
    requests: list[str] = field(default_factory=list)


@contextmanager
def serve_npm_package(
    name: str,
    version: str,
    *,
    trickle_seconds: float = 0.0,
    scripts: dict[str, str] | None = None,
    bins: dict[str, str] | None = None,
    port: int = 0,
    token: str | None = None,
    private_packument: bool = True,
    dependencies: dict[str, str] | None = None,
) -> Iterator[NpmRegistry]:
    """Serve the package on ``port`` of 127.0.0.1 (0: a free one); with ``token``, only to
    that bearer token (the packument too unless ``private_packument`` is False)."""
    tarball = stub_npm_package(name, version, scripts, bins, dependencies)
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    shasum = hashlib.sha1(tarball).hexdigest()
    holder: dict[str, NpmRegistry] = {}

    class Handler(TrickleHandler):
        def do_GET(self) -> None:  # noqa: N802
            registry = holder["r"]
            registry.requests.append(self.path)
            said = self.headers.get("Authorization")
            if said is not None:
                registry.authorizations.append(said)
            tarball_asked = self.path.endswith(".tgz")
            if token is not None and (tarball_asked or private_packument) and said != f"Bearer {token}":
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Bearer realm="npm"')
                self.send_header("Content-Type", "application/json")
                body = b'{"error":"authentication required"}'
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            if self.path.rstrip("/") in (f"/{name}", f"/{name.replace('/', '%2f')}", f"/{name.replace('/', '%2F')}"):
                doc = {
                    "name": name,
                    "dist-tags": {"latest": version},
                    "versions": {
                        version: {
                            "name": name,
                            "version": version,
                            "bin": _bins(name, bins),
                            **({"scripts": scripts, "hasInstallScript": True} if scripts else {}),
                            **({"dependencies": dependencies} if dependencies else {}),
                            "dist": {
                                "tarball": f"{registry.url}/{name}/-/{name}-{version}.tgz",
                                "shasum": shasum,
                                "integrity": integrity,
                            },
                        }
                    },
                }
                self.send_body(json.dumps(doc).encode(), "application/json")
            elif self.path.endswith(".tgz"):
                registry.tarball_requests.append(self.path)
                self.send_body(tarball, "application/octet-stream", trickle=trickle_seconds)
            else:
                self.send_body(b'{"error":"not found"}', "application/json", status=404)

    with serve_loopback(Handler, port=port) as bound:
        holder["r"] = NpmRegistry(f"http://127.0.0.1:{bound}")
        yield holder["r"]
