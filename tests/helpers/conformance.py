"""The MCP conformance suite (``@modelcontextprotocol/conformance``) against a server directly and
through the gateway: Node 22 and the suite installed once with npm, the MCP face served over
streamable HTTP on a loopback port with a server installed, and the suite's scenarios run and
read back. Used by tests/e2e/test_conformance_parity.py and ``python -m bench.conformance``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from tests.helpers.timeouts import scaled

#: The suite's newest release with both requirement sets (2025-11-25 and 2026-07-28).
VERSION = "0.2.0-alpha.12"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tools_dir(root: Path, version: str = VERSION) -> Path:
    """Node 22 (npm's ``node@22``: the suite needs it, the system's may be older) and the suite,
    installed once with npm into ``root``."""
    if not (root / "node_modules" / ".bin" / "conformance").exists():
        root.mkdir(parents=True, exist_ok=True)
        (root / "package.json").write_text('{"name": "mcp-setup-conformance", "private": true}\n')
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "node@22", f"@modelcontextprotocol/conformance@{version}"],
            cwd=root,
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=scaled(600),
        )
    return root


def suite_env(tools: Path) -> dict[str, str]:
    """The suite's environment: Node 22 first on PATH, and Node's compile cache kept beside the
    suite (each scenario is a Node process that loads the same bundle: about a fifth less CPU)."""
    return {
        **os.environ,
        "PATH": f"{tools / 'node_modules' / 'node' / 'bin'}{os.pathsep}{os.environ['PATH']}",
        "NODE_COMPILE_CACHE": str(tools / "compile-cache"),
    }


def checks_failed(out: Path) -> tuple[int, int]:
    """(passed, failed) checks of the one scenario whose results the suite wrote under ``out``."""
    passed = failed = 0
    for path in out.rglob("checks.json"):
        for check in json.loads(path.read_text()):
            if check.get("status") == "FAILURE":
                failed += 1
            elif check.get("status") == "SUCCESS":
                passed += 1
    return passed, failed


async def run_scenarios(
    tools: Path,
    url: str,
    scenarios: Sequence[tuple[str, str]],
    out: Path,
    *,
    at_once: int = 8,
    timeout: float = 120,
    slots: asyncio.Semaphore | None = None,
) -> dict[tuple[str, str], tuple[int, int]]:
    """Each ``(scenario, spec version)`` of ``scenarios`` against ``url`` (``conformance server
    --scenario S --spec-version V``), ``at_once`` at a time (or as ``slots`` allows, a bound
    shared with other runs): {(scenario, version): (checks passed, checks failed)}; a run that
    wrote no result counts as failed."""
    slots = slots or asyncio.Semaphore(at_once)
    env = suite_env(tools)

    async def one(scenario: str, version: str) -> tuple[int, int]:
        where = out / f"{scenario}-{version}"
        async with slots:
            proc = await asyncio.create_subprocess_exec(
                str(tools / "node_modules" / ".bin" / "conformance"),
                "server",
                "--url",
                url,
                "--scenario",
                scenario,
                "--spec-version",
                version,
                "-o",
                str(where),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                async with asyncio.timeout(timeout):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        passed, failed = checks_failed(where)
        return (passed, failed) if passed + failed else (0, 1)

    results = await asyncio.gather(*(one(s, v) for s, v in scenarios))
    return dict(zip(scenarios, results, strict=True))


async def wait_port(port: int, timeout: float = 120.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            try:
                _r, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                return
            except OSError:
                await asyncio.sleep(0.1)


def install_command(data: Path, keyring_backend: Any, argv: Sequence[str], *, identifier: str, version: str) -> str:
    """``argv`` installed in the data dir ``data`` as a stdio server (its tools learnt at its
    first connection); returns its slug."""
    from setup_agent.launch.spec import LaunchSpec
    from setup_agent.secrets.vault import Vault
    from setup_agent.store.database import Store

    spec = LaunchSpec(
        command=argv[0],
        args=list(argv[1:]),
        package_type="npm" if argv[0] == "npx" else "stdio",
        runner=Path(argv[0]).name,
        identifier=identifier,
        version=version,
    )
    with Store.for_data_dir(data, Vault.open(data, keyring_backend=keyring_backend)) as store:
        installed = store.servers.install(
            qualified_name=identifier if "/" in identifier else f"io.example/{identifier}",
            source="local",
            version=version,
            package_type=spec.package_type,
            launch_spec=spec.model_dump(mode="json"),
            installed_by="conformance",
            tools_hash="0" * 64,
            env={},
            title="Conformance",
            tools=None,
        )
    return str(installed.slug)


async def serve_face(runtime: Any, port: int, slug: str | None) -> Callable[[], Awaitable[None]]:
    """The MCP face of ``runtime`` (started, its servers settled) at ``http://127.0.0.1:port/mcp``
    with ``serve``'s Host and Origin checks (here the SDK's own) but no token (the suite's CLI
    sends none); the names of the server ``slug`` as the suite knows them (:class:`BareNames`).
    Returns the stopper."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    from app.mcp import McpFace

    await runtime.start(eager=True)
    await runtime.connections.wait_all_settled(120)
    face = McpFace(runtime)
    guard = TransportSecuritySettings(
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}"],
    )
    manager = StreamableHTTPSessionManager(app=face.server, security_settings=guard)
    stack = manager.run()
    await stack.__aenter__()
    asgi: Any = StreamableHTTPASGIApp(manager)
    if slug is not None:
        asgi = BareNames(asgi, slug)
    app = Starlette(routes=[Route("/mcp", endpoint=asgi, methods=["GET", "POST", "DELETE"])])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve())
    await wait_port(port)

    async def stop() -> None:
        server.should_exit = True
        await task
        await stack.__aexit__(None, None, None)
        face.close()

    return stop


class BareNames:
    """The suite calls the reference's tools and prompts by their own names (``test_simple_text``)
    and looks for them by those names in the lists; the gateway names them ``<slug>__<name>``
    (``gateway_name``: shortened with a digest past 48 characters), its one renaming. This ASGI
    wrapper stands for a client that knows the gateway's names: a ``tools/call``, ``prompts/get``
    or prompt completion of a bare name (and its ``Mcp-Name`` header) gets the gateway's name, and
    a ``tools/list`` or ``prompts/list`` answer shows the installed server's own names again. It
    changes nothing else."""

    def __init__(self, app: Any, slug: str) -> None:
        from setup_agent.store.catalog import gateway_name

        self.app, self.slug, self.gateway_name = app, slug, gateway_name
        self.bare: dict[str, str] = {}  # gateway name -> the server's own

    def to_gateway(self, name: str) -> str:
        if name.startswith("mcp_setup_") or name in self.bare:
            return name
        gateway = self.gateway_name(self.slug, name)
        self.bare[gateway] = name
        return gateway

    def request(self, body: bytes) -> tuple[bytes, tuple[str, str] | None]:
        try:
            message = json.loads(body)
        except ValueError:
            return body, None
        renamed = None
        for one in message if isinstance(message, list) else [message]:
            params = one.get("params") if isinstance(one, dict) else None
            if not isinstance(params, dict):
                continue
            if one.get("method") in ("tools/call", "prompts/get") and isinstance(params.get("name"), str):
                renamed = (params["name"], self.to_gateway(params["name"]))
                params["name"] = renamed[1]
            ref = params.get("ref")
            if one.get("method") == "completion/complete" and isinstance(ref, dict) and ref.get("type") == "ref/prompt":
                ref["name"] = self.to_gateway(str(ref.get("name")))
        return json.dumps(message).encode(), renamed

    def answer(self, body: bytes) -> bytes:
        """Each JSON message of an answer (plain, or an SSE ``data:`` line) with the lists' names
        back to the server's own."""

        def one(text: bytes) -> bytes:
            try:
                message = json.loads(text)
            except ValueError:
                return text
            result = message.get("result") if isinstance(message, dict) else None
            for key in ("tools", "prompts"):
                for item in result.get(key, []) if isinstance(result, dict) else []:
                    name = item.get("name") if isinstance(item, dict) else None
                    prefix = f"{self.slug}__"
                    if isinstance(name, str) and name.startswith(prefix):
                        item["name"] = self.bare.get(name, name[len(prefix) :])
                        self.bare[name] = item["name"]
            return json.dumps(message).encode()

        if body.lstrip().startswith((b"{", b"[")):
            return one(body)
        return b"\n".join(
            b"data: " + one(line[6:]) if line.startswith(b"data: ") else line for line in body.split(b"\n")
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = list(scope["headers"])
        replay: Any = receive
        if scope["method"] == "POST":
            chunks = []
            while True:
                event = await receive()
                chunks.append(event.get("body", b""))
                if not event.get("more_body"):
                    break
            body, renamed = self.request(b"".join(chunks))
            headers = [(k, v) for k, v in headers if k != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            if renamed is not None:
                # The header follows the body only where it matched it (the suite also sends
                # mismatched ones, which the face must refuse).
                bare, gateway = (n.encode() for n in renamed)
                headers = [(k, gateway if k == b"mcp-name" and v == bare else v) for k, v in headers]
            sent = False

            async def replay() -> Any:
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

        async def relabel(event: Any) -> None:
            if event["type"] == "http.response.start":
                event = {**event, "headers": [(k, v) for k, v in event["headers"] if k != b"content-length"]}
            elif event["type"] == "http.response.body" and event.get("body"):
                event = {**event, "body": self.answer(event["body"])}
            await send(event)

        await self.app({**scope, "headers": headers}, replay, relabel)
