"""Client for the Smithery registry (``/servers?q=&page=&pageSize=``, ``/servers/{qualifiedName}``).

Works against the legacy host (``registry.smithery.ai``) and the current Platform API
(``api.smithery.ai``): both field sets are read (connection ``url`` or ``deploymentUrl``,
server-level ``deploymentUrl``, stdio ``bundleUrl``/``runtime``).

Mapping of a server's connections:

* stdio with a ``bundleUrl`` → ``PackageOption(type="mcpb", identifier=bundleUrl,
  runtime_hint=runtime)``, keys of kind ``user_config``; stdio without a bundle (legacy
  ``stdioFunction``) cannot be run here and is skipped;
* http → ``PackageOption(type="remote", transport="streamable-http")``; each key travels
  where the property's ``x-from`` says: ``{"header": h}`` → header ``h: "{key}"`` (kind
  ``header``), otherwise a query parameter ``name={key}`` appended to ``url`` (kind
  ``url_variable``; Smithery's dot notation for nested keys). Smithery-hosted URLs
  (``*.smithery.ai``) also get ``Authorization: Bearer {smithery_api_key}`` and that
  secret header key, as the official registry lists them.

Keys from ``configSchema``: every property, nested objects flattened to dotted names
(``auth.token``); required when listed in ``required`` at every level without a ``default``,
else optional with its default shown (an unset optional query parameter is left out of the
URL). Secret when ``format: password`` or the dotted name
:func:`~registry_clients.inputs.looks_secret` (key/token/secret/password…).

The API key is sent only as ``Authorization: Bearer``, per request; it never appears in a
log line, an exception message or a repr. No key, 401 or 403 → RegistryAuthFailed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from .errors import RegistryAuthFailed, RegistryError, RegistryNotFound
from .inputs import looks_secret
from .models import Detail, KeyKind, PackageOption, RequiredKey, SearchPage, Summary
from .official import error_message
from .required_keys import SMITHERY_KEY, mark_smithery_key, smithery_hosted

__all__ = ["AUTH_HINT", "DEFAULT_SMITHERY_URL", "SmitheryRegistry", "config_keys", "smithery_detail"]

log = logging.getLogger(__name__)

#: The current Smithery Platform API host (api-openapi.json); the legacy registry.smithery.ai
#: host answers the same paths but is not the default any more.
DEFAULT_SMITHERY_URL = "https://api.smithery.ai"
AUTH_HINT = (
    "Set the environment variable MCP_SETUP_SMITHERY_API_KEY to your Smithery API key "
    "(from https://smithery.ai/account/api-keys) and restart mcp-setup."
)
SOURCE = "smithery"


def _auth_failed(why: str) -> RegistryAuthFailed:
    return RegistryAuthFailed(f"Smithery API key missing or rejected ({why}). {AUTH_HINT}", source=SOURCE)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _default(prop: Mapping[str, Any]) -> str | None:
    if "default" not in prop or prop["default"] is None:
        return None
    value = prop["default"]
    return value if isinstance(value, str) else json.dumps(value)


def config_keys(schema: Any, kind: KeyKind) -> list[tuple[RequiredKey, Mapping[str, Any]]]:
    """The keys of a JSON-Schema ``configSchema`` with the property schema behind each.

    Required: listed in ``required`` at every level and without a ``default``. The others are
    offered too, optional, with their default shown."""
    out: list[tuple[RequiredKey, Mapping[str, Any]]] = []

    def walk(node: Any, prefix: str, parent_required: bool) -> None:
        props = node.get("properties") if isinstance(node, Mapping) else None
        if not isinstance(props, Mapping):
            return
        required = node.get("required")
        required = set(required) if isinstance(required, list) else set()
        for name, prop in props.items():
            if not isinstance(prop, Mapping):
                continue
            dotted = f"{prefix}{name}"
            needed = parent_required and name in required and "default" not in prop
            if prop.get("type") == "object" or isinstance(prop.get("properties"), Mapping):
                walk(prop, dotted + ".", needed)
                continue
            enum = prop.get("enum")
            boolean = prop.get("type") == "boolean"
            choices = (
                ["true", "false"] if boolean else ([str(v) for v in enum] if isinstance(enum, list) else None) or None
            )
            out.append(
                (
                    RequiredKey(
                        name=dotted,
                        description=_text(prop.get("description")) or _text(prop.get("title")) or "",
                        secret=prop.get("format") == "password" or looks_secret(dotted),
                        required=needed,
                        default=_default(prop),
                        choices=choices,
                        format="boolean" if boolean else None,
                        kind=kind,
                    ),
                    prop,
                )
            )

    walk(schema, "", True)
    return out


def _remote_option(url: str, schema: Any, pkg_id: str) -> PackageOption:
    headers: dict[str, str] = {}
    keys: list[RequiredKey] = []
    query: list[str] = []
    for key, prop in config_keys(schema, "url_variable"):
        source = prop.get("x-from")
        header = _text(source.get("header")) if isinstance(source, Mapping) else None
        if header:
            key.kind = "header"
            headers[header] = "{" + key.name + "}"
        else:
            param = (_text(source.get("query")) if isinstance(source, Mapping) else None) or key.name
            query.append(f"{param}={{{key.name}}}")
        keys.append(key)
    if smithery_hosted(url):
        headers["Authorization"] = "Bearer {" + SMITHERY_KEY + "}"
        keys.insert(0, RequiredKey(name=SMITHERY_KEY, secret=True, kind="header"))
        mark_smithery_key(url, keys)
    if query:
        url = url + ("&" if "?" in url else "?") + "&".join(query)
    return PackageOption(
        id=pkg_id,
        type="remote",
        identifier=url,
        transport="streamable-http",
        url=url,
        headers=headers,
        required_keys=keys,
    )


def _summary(item: Mapping[str, Any]) -> Summary:
    name = _text(item.get("qualifiedName"))
    if not name:
        raise ValueError("a Smithery server needs a qualifiedName")
    remote = item.get("remote")
    verified = item.get("verified")
    return Summary(
        qualified_name=name,
        display_name=_text(item.get("displayName")) or name,
        description=_text(item.get("description")) or "",
        source=SOURCE,
        package_types=["remote"] if remote is True else [],
        remote=remote is True,
        verified=verified if isinstance(verified, bool) else None,
        homepage=_text(item.get("homepage")),
    )


def smithery_detail(data: Mapping[str, Any]) -> Detail:
    """A Smithery ``Server`` document (legacy or Platform API) as a :class:`Detail`."""
    summary = _summary(data)
    options: list[PackageOption] = []
    counts: dict[str, int] = {}

    def next_id(t: str) -> str:
        counts[t] = counts.get(t, 0) + 1
        return t if counts[t] == 1 else f"{t}:{counts[t]}"

    conns = data.get("connections")
    for conn in conns if isinstance(conns, list) else []:
        if not isinstance(conn, Mapping):
            continue
        ctype, schema = str(conn.get("type") or "").lower(), conn.get("configSchema")
        if ctype == "stdio":
            bundle = _text(conn.get("bundleUrl"))
            if not bundle:
                log.debug("%s: stdio connection without a bundle skipped", summary.qualified_name)
                continue
            options.append(
                PackageOption(
                    id=next_id("mcpb"),
                    type="mcpb",
                    identifier=bundle,
                    runtime_hint=_text(conn.get("runtime")),
                    transport="stdio",
                    required_keys=[k for k, _ in config_keys(schema, "user_config")],
                )
            )
        elif ctype in ("http", "streamable-http", "shttp"):
            url = _text(conn.get("deploymentUrl")) or _text(conn.get("url")) or _text(data.get("deploymentUrl"))
            if url:
                options.append(_remote_option(url, schema, next_id("remote")))
        else:
            log.debug("%s: connection type %r skipped", summary.qualified_name, ctype)
    return Detail(
        **summary.model_dump(exclude={"package_types", "remote"}),
        package_types=list(dict.fromkeys(o.type for o in options)),
        remote=any(o.type == "remote" for o in options) or summary.remote,
        packages=options,
        raw=dict(data),
    )


class _Hidden:
    """Holds the API key; never shows it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<hidden>"

    __str__ = __repr__


class SmitheryRegistry:
    """RegistrySource for Smithery (``name == "smithery"``); needs an API key."""

    name = SOURCE
    #: Smithery's ``q`` is semantic ("treat this as a prompt"): the hub keeps what it returns,
    #: even servers that share no word with the query, blending its order with ours.
    semantic = True

    def __init__(
        self,
        base_url: str = DEFAULT_SMITHERY_URL,
        *,
        api_key: Any = None,
        http: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
    ) -> None:
        reveal = getattr(api_key, "get_secret_value", None)  # pydantic SecretStr
        key = reveal() if callable(reveal) else api_key
        self._key = _Hidden(key) if isinstance(key, str) and key.strip() else None
        self.base_url = base_url.rstrip("/")
        self._http = http or httpx.AsyncClient(follow_redirects=True)
        self._owns_http = http is None
        self._timeout = timeout

    def __repr__(self) -> str:
        return f"SmitheryRegistry({self.base_url!r}, api_key={'<set>' if self._key else None})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._key.value, "<hidden>") if self._key else text

    async def _get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        if self._key is None:
            raise _auth_failed("no key configured")
        try:
            resp = await self._http.get(
                self.base_url + path,
                params=params,
                timeout=self._timeout,
                headers={"Authorization": f"Bearer {self._key.value}", "Accept": "application/json"},
            )
        except httpx.TimeoutException:
            raise RegistryError(
                f"Smithery at {self.base_url} did not answer within {self._timeout:g} s.", source=SOURCE
            ) from None
        except httpx.HTTPError as exc:
            raise RegistryError(
                f"Could not reach Smithery at {self.base_url} ({type(exc).__name__}).", source=SOURCE
            ) from None
        if resp.status_code in (401, 403):
            raise _auth_failed(f"HTTP {resp.status_code}")
        if resp.status_code == 404:
            raise RegistryNotFound(f"Smithery: {self._scrub(error_message(resp))}.", source=SOURCE)
        if resp.status_code >= 400:
            raise RegistryError(
                f"Smithery answered HTTP {resp.status_code}: {self._scrub(error_message(resp))}.", source=SOURCE
            )
        try:
            return resp.json()
        except ValueError:
            raise RegistryError("Smithery answered something that is not JSON.", source=SOURCE) from None

    async def search(self, query: str | None, page: int, page_size: int) -> SearchPage:
        params: dict[str, Any] = {"page": page, "pageSize": page_size}
        if query and query.strip():
            params["q"] = query.strip()
        body = await self._get_json("/servers", params)
        if not isinstance(body, Mapping):
            raise RegistryError("Smithery answered an unexpected shape.", source=SOURCE)
        servers: list[Summary] = []
        for item in body.get("servers") or []:
            try:
                servers.append(_summary(item))
            except (ValueError, TypeError, AttributeError) as exc:
                log.debug("smithery: skipping an unusable entry: %s", exc)
        pagination = body.get("pagination")
        total = pagination.get("totalPages") if isinstance(pagination, Mapping) else None
        if not isinstance(total, (int, float)) or isinstance(total, bool):
            total = page if servers else page - 1
        return SearchPage(servers=servers, total_pages=max(int(total), 0))

    async def get(self, qualified_name: str, version: str | None = None) -> Detail:
        """``qualified_name`` (may hold ``/`` and ``@``) is sent as ONE encoded path segment.

        Smithery keeps no versions: asking for one raises RegistryNotFound, saying so."""
        if version is not None:
            raise RegistryNotFound(
                f"Smithery keeps no versions of a server (only its current entry), so not {version}.", source=SOURCE
            )
        body = await self._get_json(f"/servers/{quote(qualified_name, safe='')}")
        if not isinstance(body, Mapping):
            raise RegistryError("Smithery answered an unexpected shape.", source=SOURCE)
        try:
            return smithery_detail(body)
        except (ValueError, TypeError) as exc:
            raise RegistryError(f"Smithery answered an unusable entry: {exc}", source=SOURCE) from None

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()
