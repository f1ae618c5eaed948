"""The digest of a package's artifact, as its registry publishes it: what a lock
file (``mcp-setup export``) records and ``mcp-setup apply`` checks before anything is fetched.

============  =====================================================================  ==================
type          where it comes from                                                    form
============  =====================================================================  ==================
``mcpb``      the registry entry's ``fileSha256`` (the bundle's bytes are checked     ``sha256:<hex>``
              against it at every fetch: setup_agent/launch/bundle.py)
``npm``       the npm registry's packument: ``versions[V].dist.integrity`` (npm       ``sha512-<base64>``
              checks the tarball against it)
``pypi``      the index's simple page (PEP 691 JSON or PEP 503 HTML): the sha256 of   ``sha256:<hex>``, or
              each file of version V (uv checks the files against them)              ``sha256-files:<hex>``
``oci``       a digest pinned in the identifier (``image@sha256:…``)                  ``sha256:<hex>``
============  =====================================================================  ==================

A PyPI release of several files (wheels for each platform, an sdist) gets one digest over all
of them: the SHA-256 of the sorted ``<file name> <sha256>`` lines. An OCI image named by a tag
only, a NuGet package and a remote have no digest here (None): the lock file says so. A lookup
that fails (the registry is down) is None as well, and logged; it never fails an install.
"""

from __future__ import annotations

import hashlib
import logging
import re
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from .spec import LaunchSpec

__all__ = ["ArtifactDigests", "digest_kind"]

logger = logging.getLogger(__name__)

_NPM_DEFAULT = "https://registry.npmjs.org"
_PYPI_DEFAULT = "https://pypi.org/simple"
_OCI_PIN = re.compile(r"@(sha256:[0-9a-f]{64})$")
_KINDS = {"mcpb": "MCPB sha256", "npm": "npm integrity", "pypi": "PyPI sha256", "oci": "OCI digest"}


def digest_kind(package_type: str) -> str:
    """What a digest of ``package_type`` is called, for people (``npm integrity``)."""
    return _KINDS.get(package_type, f"{package_type} digest")


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links += [v for k, v in attrs if k == "href" and v]


class ArtifactDigests:
    """Looks up the digest of the artifact a :class:`LaunchSpec` runs (see the module's table)."""

    def __init__(self, http: httpx.AsyncClient | None = None, *, timeout: float = 10.0) -> None:
        self._http = http
        self._timeout = timeout

    async def resolve(self, spec: LaunchSpec, registry_base_url: str | None = None) -> str | None:
        """The artifact's digest, or None when there is none to record (or the lookup failed)."""
        kind = spec.package_type
        try:
            if kind == "mcpb":
                return f"sha256:{spec.file_sha256.lower()}" if spec.file_sha256 else None
            if kind == "oci":
                pinned = _OCI_PIN.search(spec.identifier)
                return pinned.group(1) if pinned else None
            if kind == "npm" and spec.version:
                return await self._npm(spec.identifier, spec.version, _npm_base(spec, registry_base_url))
            if kind == "pypi" and spec.version:
                return await self._pypi(spec.identifier, spec.version, _pypi_base(spec, registry_base_url))
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            logger.info(
                "The %s of %s could not be read from its registry (%s)",
                digest_kind(kind),
                spec.identifier,
                type(exc).__name__,
            )
        return None

    async def _get(self, url: str, accept: str) -> httpx.Response:
        if self._http is not None:
            response = await self._http.get(url, headers={"Accept": accept}, timeout=self._timeout)
        else:
            async with httpx.AsyncClient(follow_redirects=True) as client:
                response = await client.get(url, headers={"Accept": accept}, timeout=self._timeout)
        response.raise_for_status()
        return response

    async def _npm(self, name: str, version: str, base: str) -> str | None:
        response = await self._get(f"{base.rstrip('/')}/{quote(name, safe='@')}", "application/json")
        doc: Any = response.json()
        integrity = doc["versions"][version]["dist"].get("integrity")
        return str(integrity) if integrity else None

    async def _pypi(self, name: str, version: str, base: str) -> str | None:
        url = f"{base.rstrip('/')}/{_normalize(name)}/"
        response = await self._get(url, "application/vnd.pypi.simple.v1+json, text/html;q=0.5")
        files: dict[str, str] = {}
        if "json" in response.headers.get("content-type", ""):
            for item in response.json().get("files", []):
                sha = (item.get("hashes") or {}).get("sha256")
                if sha:
                    files[str(item["filename"])] = str(sha).lower()
        else:
            parser = _Links()
            parser.feed(response.text)
            for link in parser.links:
                path, _, fragment = link.partition("#")
                if fragment.startswith("sha256="):
                    files[path.rsplit("/", 1)[-1]] = fragment[len("sha256=") :].lower()
        mine = {f: sha for f, sha in files.items() if _of_version(f, name, version)}
        if not mine:
            return None
        if len(mine) == 1:
            return "sha256:" + next(iter(mine.values()))
        lines = "".join(f"{f} {sha}\n" for f, sha in sorted(mine.items()))
        return "sha256-files:" + hashlib.sha256(lines.encode()).hexdigest()


def _of_version(filename: str, name: str, version: str) -> bool:
    """Is ``filename`` (a wheel or an sdist) a file of ``name`` ``version``?"""
    if filename.endswith(".whl"):
        parts = filename[: -len(".whl")].split("-")
        file_name, file_version = (parts[0], parts[1]) if len(parts) >= 5 else ("", "")
    else:
        stem = re.sub(r"\.(tar\.gz|tar\.bz2|zip|tgz)$", "", filename)
        file_name, _, file_version = stem.rpartition("-")
    return _normalize(file_name) == _normalize(name) and file_version == version


def _npm_base(spec: LaunchSpec, given: str | None) -> str:
    for arg in spec.args:
        if arg.startswith("--registry="):
            return arg.split("=", 1)[1].replace("$$", "$")
    return given or _NPM_DEFAULT


def _pypi_base(spec: LaunchSpec, given: str | None) -> str:
    args = spec.args
    for i, arg in enumerate(args[:-1]):
        if arg in ("--default-index", "--index-url", "-i"):
            return args[i + 1].replace("$$", "$")
    if given and (urlsplit(given).hostname or "") not in ("pypi.org", "www.pypi.org"):
        return given
    return _PYPI_DEFAULT
