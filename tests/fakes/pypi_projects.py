"""A PyPI simple index (PEP 503 + PEP 658 metadata) of several projects and versions, on loopback.

For the known-failure repairs (issue 26), built here with the standard library only:

- :func:`executable_mismatch`: the stdio stub server as a package whose console script is not
  named like the package (``uvx <name>`` fails: "An executable named … is not provided");
- :func:`fastmcp_projects`: a server written for mcp 1.x (``from mcp.server.fastmcp import …``)
  with an unpinned ``Requires-Dist: mcp``, and a fake ``mcp`` in two versions: 2.0.0, whose
  ``mcp.server.fastmcp`` raises mcp 2.x's own "No module named …" message, and 1.9.0, which
  has it (the stub server). Unpinned, uvx picks 2.0.0; with ``--with mcp<2`` it works;
- :func:`needs_python`: a package that declares ``Requires-Python: >=X``.

``with serve_pypi_projects(dists) as index: index.url`` (``…/simple``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import ssl
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from tests.fakes.loopback import TrickleHandler, serve_loopback
from tests.stub_server.bundle import SERVER_PY

__all__ = [
    "Dist",
    "ProjectIndex",
    "executable_mismatch",
    "fastmcp_projects",
    "needs_python",
    "serve_pypi_projects",
    "wheel",
]

_ZIP_DATE = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Dist:
    project: str
    filename: str
    body: bytes
    metadata: bytes
    requires_python: str | None = None


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def wheel(
    name: str,
    version: str,
    files: Mapping[str, bytes],
    *,
    scripts: Mapping[str, str] | None = None,
    requires: Sequence[str] = (),
    requires_python: str | None = None,
) -> Dist:
    """A py3-none-any wheel holding ``files``, with console ``scripts`` (name → ``module:func``)."""
    mod = name.replace("-", "_")
    info = f"{mod}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    meta += "".join(f"Requires-Dist: {r}\n" for r in requires)
    if requires_python:
        meta += f"Requires-Python: {requires_python}\n"
    content = dict(files)
    content[f"{info}/METADATA"] = meta.encode()
    content[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: mcp-setup-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    if scripts:
        content[f"{info}/entry_points.txt"] = (
            "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())
        ).encode()

    def digest(data: bytes) -> str:
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = "".join(f"{path},{digest(data)},{len(data)}\n" for path, data in content.items())
    content[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in content.items():
            zf.writestr(zipfile.ZipInfo(path, _ZIP_DATE), data)
    return Dist(name, f"{mod}-{version}-py3-none-any.whl", buf.getvalue(), meta.encode(), requires_python)


def executable_mismatch(name: str, version: str = "1.0.0") -> list[Dist]:
    """The stub server as ``name`` whose only executable is ``name`` with ``_`` for ``-``."""
    mod = name.replace("-", "_")
    files = {f"{mod}/__init__.py": b"", f"{mod}/server.py": SERVER_PY.read_bytes()}
    return [wheel(name, version, files, scripts={mod: f"{mod}.server:main"})]


_MCP2_FASTMCP = (
    "_MESSAGE = (\"No module named 'mcp.server.fastmcp'. This is mcp 2.x, where FastMCP was renamed to MCPServer \"\n"
    "            \"and other APIs changed; pin 'mcp<2' to keep running v1 code.\")\n"
    "raise ModuleNotFoundError(_MESSAGE, name=__name__)\n"
)


def fastmcp_projects(name: str, version: str = "1.0.0") -> list[Dist]:
    """``name`` (needs ``mcp.server.fastmcp``, unpinned ``mcp``), and a fake mcp 2.0.0 and 1.9.0."""
    mod = name.replace("-", "_")
    app = b"from mcp.server.fastmcp import main\n"
    server = {f"{mod}/__init__.py": b"", f"{mod}/app.py": app}
    mcp_files = {"mcp/__init__.py": b"", "mcp/server/__init__.py": b""}
    return [
        wheel(name, version, server, scripts={name: f"{mod}.app:main"}, requires=["mcp"]),
        wheel("mcp", "2.0.0", {**mcp_files, "mcp/server/fastmcp.py": _MCP2_FASTMCP.encode()}),
        wheel("mcp", "1.9.0", {**mcp_files, "mcp/server/fastmcp/__init__.py": SERVER_PY.read_bytes()}),
    ]


def needs_python(name: str, requires_python: str, version: str = "1.0.0") -> list[Dist]:
    mod = name.replace("-", "_")
    files = {f"{mod}/__init__.py": b"", f"{mod}/server.py": SERVER_PY.read_bytes()}
    return [wheel(name, version, files, scripts={name: f"{mod}.server:main"}, requires_python=requires_python)]


@dataclass
class ProjectIndex:
    url: str
    requests: list[str] = field(default_factory=list)


@contextmanager
def serve_pypi_projects(dists: Sequence[Dist], *, tls: ssl.SSLContext | None = None) -> Iterator[ProjectIndex]:
    by_project: dict[str, list[Dist]] = {}
    for d in dists:
        by_project.setdefault(_norm(d.project), []).append(d)
    files = {d.filename: d for d in dists}
    holder: dict[str, ProjectIndex] = {}

    class Handler(TrickleHandler):
        def do_GET(self) -> None:  # noqa: N802
            holder["i"].requests.append(self.path)
            path = self.path.split("?", 1)[0]
            if path.startswith("/simple/"):
                project = _norm(path[len("/simple/") :].strip("/"))
                links = []
                for d in by_project.get(project, []):
                    sha = hashlib.sha256(d.metadata).hexdigest()
                    attrs = f'href="/files/{d.filename}#sha256={hashlib.sha256(d.body).hexdigest()}"'
                    attrs += f' data-dist-info-metadata="sha256={sha}" data-core-metadata="sha256={sha}"'
                    if d.requires_python:
                        attrs += (
                            f' data-requires-python="{d.requires_python.replace(">", "&gt;").replace("<", "&lt;")}"'
                        )
                    links.append(f"<a {attrs}>{d.filename}</a>")
                if not links:
                    self.send_body(b"not found", "text/plain", status=404)
                    return
                self.send_body(f"<!DOCTYPE html><html><body>{''.join(links)}</body></html>".encode(), "text/html")
            elif path.startswith("/files/") and path.endswith(".metadata") and path[7:-9] in files:
                self.send_body(files[path[7:-9]].metadata, "application/octet-stream")
            elif path.startswith("/files/") and path[7:] in files:
                self.send_body(files[path[7:]].body, "application/octet-stream")
            else:
                self.send_body(b"not found", "text/plain", status=404)

    with serve_loopback(Handler, tls=tls) as port:
        holder["i"] = ProjectIndex(f"{'https' if tls else 'http'}://127.0.0.1:{port}/simple")
        yield holder["i"]
