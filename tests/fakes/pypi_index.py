"""A one-package PyPI simple index (PEP 503 HTML) on loopback that can serve its file slowly.

It answers what ``uv``/``uvx`` ask of an index for a package: the project page
(``GET /simple/<name>/``), the wheel's core metadata (PEP 658, ``<file>.metadata``) and the
file itself (``GET /files/<file>``). With ``trickle_seconds`` the file is sent in pieces spread
over that long, like a first download on a slow network (#17 item 3); ``down`` makes every
request answer 503. ``file_requests`` counts the downloads of the file (metadata excluded): a
warm uv cache asks for none. With ``login`` (user name, password) it is a private index: every
request without that HTTP basic login answers 401 (its file's only, with ``private_pages`` False;
``authorizations`` lists what it received).

Two packages can be served, both built here with the standard library only:

- :func:`stub_wheel`: the stdio stub server (tests/stub_server/server.py) as a pure wheel with
  a console script named like the package (``uvx <name>`` runs it); ``pth`` adds a ``.pth``
  file, which Python runs at start-up in any environment the wheel is installed into;
- :func:`marker_sdist`: an sdist only, whose in-tree build backend writes a marker file when
  it is imported (a build would run the package's code).
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.fakes.loopback import TrickleHandler, serve_loopback
from tests.stub_server.bundle import SERVER_PY

__all__ = ["PypiIndex", "marker_sdist", "serve_pypi_package", "stub_wheel"]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


def _module(name: str) -> str:
    return name.replace("-", "_")


def _metadata(name: str, version: str) -> bytes:
    return f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()


def stub_wheel(name: str, version: str, *, pth: str | None = None) -> tuple[str, bytes]:
    """``(file name, bytes)`` of a py3-none-any wheel of the stub server, console script ``name``."""
    mod = _module(name)
    info = f"{mod}-{version}.dist-info"
    files = {
        f"{mod}/__init__.py": b"",
        f"{mod}/server.py": SERVER_PY.read_bytes(),
        f"{info}/METADATA": _metadata(name, version),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: mcp-setup-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[console_scripts]\n{name} = {mod}.server:main\n".encode(),
    }
    if pth is not None:
        files[f"{mod}_start.pth"] = pth.encode()

    def digest(data: bytes) -> str:
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{path},{digest(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in files.items():
            zf.writestr(zipfile.ZipInfo(path, _ZIP_DATE), data)
    return f"{mod}-{version}-py3-none-any.whl", buf.getvalue()


def marker_sdist(name: str, version: str, marker: Path) -> tuple[str, bytes]:
    """``(file name, bytes)`` of an sdist whose build backend (in the tree, no requirement) writes
    ``marker`` as soon as a frontend imports it, then fails the build."""
    mod = _module(name)
    root = f"{mod}-{version}"
    files = {
        f"{root}/PKG-INFO": _metadata(name, version),
        f"{root}/pyproject.toml": (
            f'[project]\nname = "{name}"\nversion = "{version}"\n\n'
            '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        ).encode(),
        f"{root}/backend.py": (
            f"open({str(marker)!r}, 'w').write('the build backend ran')\n"
            "def get_requires_for_build_wheel(config_settings=None):\n    return []\n"
            "def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):\n"
            "    raise SystemExit('this sdist does not build')\n"
        ).encode(),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, data in files.items():
            tinfo = tarfile.TarInfo(path)
            tinfo.size = len(data)
            tinfo.mtime = 0
            tar.addfile(tinfo, io.BytesIO(data))
    return f"{root}.tar.gz", buf.getvalue()


@dataclass
class PypiIndex:
    #: The index URL (``…/simple``), for ``--default-index`` or a registry's ``registryBaseUrl``.
    url: str
    #: Downloads of the package file (a wheel or sdist; its PEP 658 metadata not counted).
    file_requests: list[str] = field(default_factory=list)
    #: Every request path, in order.
    requests: list[str] = field(default_factory=list)
    #: Every request answers 503 while set.
    down: bool = False
    #: Every ``Authorization`` header it received, in order.
    authorizations: list[str] = field(default_factory=list)


@contextmanager
def serve_pypi_package(
    name: str,
    file: tuple[str, bytes],
    *,
    trickle_seconds: float = 0.0,
    login: tuple[str, str] | None = None,
    private_pages: bool = True,
) -> Iterator[PypiIndex]:
    filename, body = file
    basic = "Basic " + base64.b64encode(f"{login[0]}:{login[1]}".encode()).decode() if login else None
    meta = _metadata(name, filename.split("-")[1]) if filename.endswith(".whl") else None
    holder: dict[str, PypiIndex] = {}

    class Handler(TrickleHandler):
        def do_GET(self) -> None:  # noqa: N802
            index = holder["i"]
            index.requests.append(self.path)
            said = self.headers.get("Authorization")
            if said is not None:
                index.authorizations.append(said)
            asks_file = self.path == f"/files/{filename}"
            if basic is not None and (asks_file or private_pages) and said != basic:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="index"')
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "12")
                self.end_headers()
                self.wfile.write(b"unauthorized")
                return
            if index.down:
                self.send_body(b"down", "text/plain", status=503)
            elif self.path.rstrip("/") == f"/simple/{name}":
                attrs = f'href="/files/{filename}#sha256={hashlib.sha256(body).hexdigest()}"'
                if meta is not None:
                    sha = hashlib.sha256(meta).hexdigest()
                    attrs += f' data-dist-info-metadata="sha256={sha}" data-core-metadata="sha256={sha}"'
                page = f"<!DOCTYPE html><html><body><a {attrs}>{filename}</a></body></html>"
                self.send_body(page.encode(), "text/html")
            elif meta is not None and self.path == f"/files/{filename}.metadata":
                self.send_body(meta, "application/octet-stream")
            elif self.path == f"/files/{filename}":
                index.file_requests.append(self.path)
                self.send_body(body, "application/octet-stream", trickle=trickle_seconds)
            else:
                self.send_body(b"not found", "text/plain", status=404)

    with serve_loopback(Handler) as port:
        holder["i"] = PypiIndex(f"http://127.0.0.1:{port}/simple")
        yield holder["i"]
