"""A fake Smithery registry (``/servers`` and ``/servers/{qualifiedName}``) over real HTTP.

Entries follow the ``ServerSummary``/``Server`` schemas of ``fixtures/registry/smithery/
api-openapi.json`` (no real captured Smithery responses exist); one entry uses the legacy
``registry.smithery.ai`` connection shape (``url`` instead of ``deploymentUrl``, a stdio
connection without a bundle). Every request needs ``Authorization: Bearer <api_key>``,
else 401 ``{"error": …}``. ``q`` is a case-insensitive substring over qualifiedName,
displayName and description; ``page``/``pageSize`` (≤ 100) page with a ``pagination`` object.

By hand::

    python -m tests.fakes.smithery_registry --port 8802 --api-key demo-key
"""

from __future__ import annotations

import argparse
import copy
import math
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import FakeHTTPServer, serve_forever

__all__ = ["DEFAULT_API_KEY", "FakeSmitheryRegistry", "default_servers"]

DEFAULT_API_KEY = "fake-smithery-key"
SUMMARY_FIELDS = (
    "id",
    "qualifiedName",
    "namespace",
    "slug",
    "displayName",
    "description",
    "iconUrl",
    "verified",
    "useCount",
    "remote",
    "isDeployed",
    "createdAt",
    "homepage",
    "bySmithery",
    "owner",
    "score",
)
SERVER_FIELDS = (
    "qualifiedName",
    "displayName",
    "description",
    "iconUrl",
    "remote",
    "deploymentUrl",
    "connections",
    "security",
    "tools",
    "resources",
    "prompts",
)


def _server(qualified_name: str, display: str, description: str, **fields: Any) -> dict[str, Any]:
    namespace, _, slug = qualified_name.lstrip("@").partition("/")
    base: dict[str, Any] = {
        "id": f"00000000-0000-4000-8000-{zlib.crc32(qualified_name.encode()):012d}",
        "qualifiedName": qualified_name,
        "namespace": namespace or None,
        "slug": slug or None,
        "displayName": display,
        "description": description,
        "iconUrl": None,
        "verified": False,
        "useCount": 0,
        "remote": True,
        "isDeployed": True,
        "createdAt": "2025-06-01T00:00:00.000Z",
        "homepage": f"https://smithery.ai/server/{qualified_name}",
        "bySmithery": False,
        "owner": None,
        "score": None,
        "deploymentUrl": None,
        "connections": [],
        "security": {"scanPassed": True},
        "tools": [{"name": "hello", "description": "Say hello", "inputSchema": {"type": "object", "properties": {}}}],
        "resources": None,
        "prompts": None,
    }
    base.update(fields)
    return base


def default_servers() -> list[dict[str, Any]]:
    """Three rich entries (remote, mcpb bundle with nested config, legacy shape) + 9 plain ones."""
    servers = [
        _server(
            "smithery-ai/github",
            "GitHub",
            "Access the GitHub API: repositories, issues and pull requests.",
            verified=True,
            bySmithery=True,
            deploymentUrl="https://server.smithery.ai/smithery-ai/github",
            connections=[
                {
                    "type": "http",
                    "deploymentUrl": "https://server.smithery.ai/smithery-ai/github/mcp",
                    "configSchema": {
                        "type": "object",
                        "required": ["githubPersonalAccessToken"],
                        "properties": {
                            "githubPersonalAccessToken": {"type": "string", "description": "A GitHub PAT."},
                            "readOnly": {"type": "boolean", "default": False},
                        },
                    },
                }
            ],
        ),
        _server(
            "@acme/weather",
            "Acme Weather",
            "Forecasts and current weather from Acme.",
            remote=False,
            isDeployed=False,
            connections=[
                {
                    "type": "stdio",
                    "bundleUrl": "https://bundles.example.com/acme/weather-1.2.0.mcpb",
                    "runtime": "node",
                    "configSchema": {
                        "type": "object",
                        "required": ["units", "auth", "dbPass"],
                        "properties": {
                            "units": {"type": "string", "enum": ["metric", "imperial"], "description": "Units"},
                            "auth": {
                                "type": "object",
                                "required": ["token", "region"],
                                "properties": {
                                    "token": {"type": "string", "description": "Acme API token"},
                                    "region": {"type": "string", "default": "eu"},
                                },
                            },
                            "dbPass": {"type": "string", "format": "password", "description": "Cache DB"},
                            "debug": {"type": "boolean", "default": False},
                            "optionalNote": {"type": "string"},
                        },
                    },
                }
            ],
        ),
        _server(  # legacy registry.smithery.ai shape
            "exa",
            "Exa Search",
            "Web search with Exa.",
            deploymentUrl="https://server.smithery.ai/exa",
            connections=[
                {
                    "type": "http",
                    "url": "https://server.smithery.ai/exa/mcp",
                    "configSchema": {
                        "type": "object",
                        "required": ["exaApiKey", "profile"],
                        "properties": {
                            "exaApiKey": {"type": "string", "x-from": {"header": "x-exa-api-key"}},
                            "profile": {"type": "string", "description": "Search profile"},
                        },
                    },
                },
                {"type": "stdio", "configSchema": {}, "published": False},
            ],
        ),
    ]
    for i in range(1, 10):
        servers.append(_server(f"demo/tool-{i}", f"Demo tool {i}", "A demo server for paging tests."))
    return servers


class FakeSmitheryRegistry(FakeHTTPServer):
    """``with FakeSmitheryRegistry(api_key="k") as reg: reg.url``."""

    def __init__(
        self,
        servers: Iterable[Mapping[str, Any]] | None = None,
        *,
        api_key: str = DEFAULT_API_KEY,
        port: int = 0,
        answers: Mapping[str, list[str]] | None = None,
    ) -> None:
        super().__init__(port=port)
        self.api_key = api_key
        self.servers = [dict(s) for s in (default_servers() if servers is None else servers)]
        #: Semantic answers, as the real ``q`` ("treat this as a prompt"): query (lower case) →
        #: the qualified names returned, in that order, whatever words they hold.
        self.answers = {k.lower(): list(v) for k, v in (answers or {}).items()}

    def _check(self, request: Request) -> Response | None:
        ok = request.headers.get("authorization") == f"Bearer {self.api_key}"
        self.record(request, authorized=ok)
        return None if ok else JSONResponse({"error": "Unauthorized"}, status_code=401)

    async def list_servers(self, request: Request) -> Response:
        if (denied := self._check(request)) is not None:
            return denied
        if (held := await self.gate()) is not None:
            return held
        try:
            page = int(request.query_params.get("page", "1"))
            size = int(request.query_params.get("pageSize", "10"))
        except ValueError:
            return JSONResponse({"error": "page and pageSize must be integers"}, status_code=400)
        if page < 1 or not 1 <= size <= 100:
            return JSONResponse({"error": "page must be ≥ 1 and pageSize 1..100"}, status_code=400)
        q = (request.query_params.get("q") or "").lower()
        hits = [
            s
            for s in self.servers
            if not q or any(q in str(s.get(f) or "").lower() for f in ("qualifiedName", "displayName", "description"))
        ]
        if q in self.answers:
            by_name = {s["qualifiedName"]: s for s in self.servers}
            hits = [by_name[n] for n in self.answers[q] if n in by_name]
        chunk = hits[(page - 1) * size : page * size]
        return JSONResponse(
            {
                "servers": [{f: copy.deepcopy(s.get(f)) for f in SUMMARY_FIELDS} for s in chunk],
                "pagination": {
                    "currentPage": page,
                    "pageSize": size,
                    "totalPages": math.ceil(len(hits) / size),
                    "totalCount": len(hits),
                },
            }
        )

    async def get_server(self, request: Request) -> Response:
        if (denied := self._check(request)) is not None:
            return denied
        if (held := await self.gate()) is not None:
            return held
        name = request.path_params["name"]
        for s in self.servers:
            if s["qualifiedName"] == name:
                return JSONResponse({f: copy.deepcopy(s.get(f)) for f in SERVER_FIELDS})
        return JSONResponse({"error": "Server not found"}, status_code=404)

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/servers", self.list_servers),
                Route("/servers/{name:path}", self.get_server),
            ]
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake Smithery registry on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8802)
    parser.add_argument("--api-key", default=DEFAULT_API_KEY)
    args = parser.parse_args(argv)
    fake = FakeSmitheryRegistry(api_key=args.api_key, port=args.port)
    serve_forever(fake, "Fake Smithery registry at {url} (bearer key: the --api-key value). Ctrl-C to stop.")


if __name__ == "__main__":
    main()
