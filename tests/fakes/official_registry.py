"""A fake of the official MCP registry API (``/v0.1``) serving fixture entries over real HTTP.

Semantics copied from the real service: ``GET /v0.1/servers`` with ``search`` (case-
insensitive substring on the name), ``cursor`` (opaque; from ``metadata.nextCursor``),
``limit`` (default 30, 1..100, else 422) and ``version`` (``latest`` or an exact version);
entries ordered by name then publication. ``GET /v0.1/servers/{name}/versions/{version}``
(``latest`` allowed; the name arrives URL-encoded as one segment) answers a ServerResponse
or a 404 problem-JSON. Errors are ``application/problem+json`` like the real API.

By hand::

    python -m tests.fakes.official_registry --port 8801 [--entries FILE.json]
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import FakeHTTPServer, serve_forever

__all__ = ["SAMPLE_FILE", "FakeOfficialRegistry", "load_entries"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "registry" / "official"
SAMPLE_FILE = FIXTURES / "servers_sample_2025-12-18.json"
_META = "io.modelcontextprotocol.registry/official"


def load_entries(path: Path = SAMPLE_FILE) -> list[dict[str, Any]]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return data if isinstance(data, list) else [data]


def problem(status: int, title: str, detail: str) -> JSONResponse:
    return JSONResponse(
        {"title": title, "status": status, "detail": detail},
        status_code=status,
        media_type="application/problem+json",
    )


def _wrap(entry: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(entry.get("server"), Mapping):
        return dict(entry)
    return {"server": dict(entry), "_meta": {}}


class FakeOfficialRegistry(FakeHTTPServer):
    """``with FakeOfficialRegistry(entries) as reg: reg.url`` — entries default to the sample file."""

    def __init__(self, entries: Iterable[Mapping[str, Any]] | None = None, *, port: int = 0) -> None:
        super().__init__(port=port)
        wrapped = [_wrap(e) for e in (load_entries() if entries is None else entries)]
        # Entries without registry metadata: the last one of a name counts as latest.
        last: dict[str, int] = {}
        for i, e in enumerate(wrapped):
            last[e["server"]["name"]] = i
        for i, e in enumerate(wrapped):
            meta = e.setdefault("_meta", {}).setdefault(_META, {})
            meta.setdefault("isLatest", last[e["server"]["name"]] == i)
            meta.setdefault("status", "active")
        self.entries = sorted(wrapped, key=lambda e: (e["server"]["name"], e["_meta"][_META].get("publishedAt") or ""))

    def down_response(self) -> Response:
        return problem(500, "Internal Server Error", "The fake registry is down (test switch).")

    # -- helpers --------------------------------------------------------------------------
    @staticmethod
    def _cursor(index: int) -> str:
        return base64.urlsafe_b64encode(f"fake-official:{index}".encode()).decode().rstrip("=")

    @staticmethod
    def _uncursor(cursor: str) -> int:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, index = raw.partition(":")
        if prefix != "fake-official":
            raise ValueError(cursor)
        return int(index)

    def _latest(self, name: str) -> dict[str, Any] | None:
        found = [e for e in self.entries if e["server"]["name"] == name]
        latest = [e for e in found if e["_meta"][_META].get("isLatest")]
        return (latest or found or [None])[-1]

    # -- endpoints ------------------------------------------------------------------------
    async def list_servers(self, request: Request) -> Response:
        self.record(request)
        if (held := await self.gate()) is not None:
            return held
        params = request.query_params
        try:
            limit = int(params.get("limit", "30"))
        except ValueError:
            return problem(422, "Unprocessable Entity", "limit must be an integer")
        if not 1 <= limit <= 100:
            return problem(422, "Unprocessable Entity", "limit must be between 1 and 100")
        try:
            start = self._uncursor(params["cursor"]) if params.get("cursor") else 0
        except (ValueError, UnicodeDecodeError):
            return problem(400, "Bad Request", "Invalid cursor parameter")
        search = (params.get("search") or "").lower()
        version = params.get("version")
        matches = [
            e
            for e in self.entries
            if search in e["server"]["name"].lower()
            and (
                version is None
                or (version == "latest" and e["_meta"][_META].get("isLatest"))
                or (version not in (None, "latest") and e["server"].get("version") == version)
            )
        ]
        page = matches[start : start + limit]
        metadata: dict[str, Any] = {"count": len(page)}
        if start + limit < len(matches):
            metadata["nextCursor"] = self._cursor(start + limit)
        return JSONResponse({"servers": page, "metadata": metadata})

    async def server_version(self, request: Request) -> Response:
        self.record(request)
        if (held := await self.gate()) is not None:
            return held
        name, version = request.path_params["name"], request.path_params["version"]
        if version == "latest":
            entry = self._latest(name)
        else:
            entry = next(
                (e for e in self.entries if e["server"]["name"] == name and e["server"].get("version") == version),
                None,
            )
        if entry is None:
            return problem(404, "Not Found", "Server not found")
        return JSONResponse(entry)

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v0.1/servers", self.list_servers),
                Route("/v0.1/servers/{name:path}/versions/{version}", self.server_version),
            ]
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a fake official MCP registry on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=8801)
    parser.add_argument("--entries", type=Path, default=SAMPLE_FILE, help="JSON list of server.json entries")
    args = parser.parse_args(argv)
    fake = FakeOfficialRegistry(load_entries(args.entries), port=args.port)
    serve_forever(fake, "Fake official MCP registry at {url} (%d entries). Ctrl-C to stop." % len(fake.entries))


if __name__ == "__main__":
    main()
