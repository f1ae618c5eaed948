"""MCPB bundles: download and verify, unpack safely.

Flow: ``fetch_bundle`` (``https://``, or ``file://`` for the local catalog only; SHA-256
checked) → ``unpack_bundle`` into the server's install dir (no member, and no symlink once
every member is in place, may lead out of it) → :mod:`setup_agent.launch.manifest`
(``read_manifest`` → ``spec_from_manifest``).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import zipfile
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit
from urllib.request import url2pathname

import anyio
import httpx

from setup_agent.errors import BundleInvalid

from .manifest import MAX_MANIFEST_BYTES, Manifest, parse_manifest, read_manifest

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_UNPACKED",
    "MAX_MEMBERS",
    "bundle_manifest",
    "fetch_bundle",
    "file_sha256",
    "unpack_bundle",
]

DEFAULT_MAX_BYTES = 200 * 1024 * 1024
DEFAULT_MAX_UNPACKED = 1024 * 1024 * 1024
#: A bundle holds at most this many members: more is refused before anything is read.
MAX_MEMBERS = 10_000
_EOCD = b"PK\x05\x06"
_CHUNK = 64 * 1024
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}
_SHA = re.compile(r"^[0-9a-f]{64}$")
#: Pseudo-filesystems a ``file://`` bundle is never read from (``/proc/self/environ`` …).
_FORBIDDEN_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


# --- download -------------------------------------------------------------------------


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of a file (to pin a bundle whose registry entry gave none)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme == "https" or (parts.scheme == "http" and (parts.hostname or "") in _LOOPBACK):
        return
    raise BundleInvalid(f"Bundles are fetched over https:// or from file:// only, not from {url}.")


def _too_big(url: str, max_bytes: int) -> BundleInvalid:
    return BundleInvalid(f"The bundle from {url} is larger than the {max_bytes}-byte limit.")


def _local_source(url: str) -> Path:
    """The path a ``file://`` URL names, refused under /proc, /sys and /dev (links followed)."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise BundleInvalid(f"file:// bundle URLs must name a local path, not {url}.")
    src = Path(url2pathname(parts.path))
    for path in (Path(os.path.abspath(src)), Path(os.path.realpath(src))):
        if any(path == root or path.is_relative_to(root) for root in _FORBIDDEN_ROOTS):
            raise BundleInvalid("file:// bundles are never read from /proc, /sys or /dev.")
    return src


async def _chunks(
    url: str, http: httpx.AsyncClient | None, max_bytes: int, allow_file: bool
) -> AsyncGenerator[bytes, None]:
    """The bundle's bytes, from a local file (read in a worker thread) or over HTTP."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        if not allow_file:
            raise BundleInvalid("file:// bundles are accepted only from the local catalog, not from a remote registry.")
        src = _local_source(url)
        try:
            fh = open(src, "rb")  # noqa: SIM115 - closed below
        except OSError:
            raise BundleInvalid(f"No bundle file at {src}.") from None
        with fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise BundleInvalid(f"No bundle file at {src}.")
            while chunk := await anyio.to_thread.run_sync(fh.read, _CHUNK):
                yield chunk
        return
    _check_url(url)
    client = http or httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=120.0))
    try:
        async with client.stream("GET", url, follow_redirects=True) as resp:
            _check_url(str(resp.url))
            if resp.status_code >= 400:
                raise BundleInvalid(f"Could not download the bundle from {url}: HTTP {resp.status_code}.")
            length = resp.headers.get("content-length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise _too_big(url, max_bytes)
            async for chunk in resp.aiter_bytes(_CHUNK):
                yield chunk
    except httpx.HTTPError as exc:
        raise BundleInvalid(f"Could not download the bundle from {url}: {type(exc).__name__}.") from exc
    finally:
        if http is None:
            await client.aclose()


async def fetch_bundle(
    url: str,
    expected_sha256: str | None,
    dest: Path,
    *,
    http: httpx.AsyncClient | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    allow_file: bool = False,
) -> Path:
    """Download (or copy, for ``file://``) a bundle to ``dest/bundle.mcpb`` and verify it.

    ``https://`` anywhere, ``http://`` only on loopback, redirects followed. ``file://``
    only with ``allow_file`` (the caller passes it for the local catalog alone), and never a
    path under /proc, /sys or /dev, nor anything but a regular file. A SHA-256
    mismatch or a bundle over ``max_bytes`` raises :class:`BundleInvalid` and leaves no file
    behind. With ``expected_sha256=None`` nothing is verified: pin it with :func:`file_sha256`.
    """
    expected = expected_sha256.strip().lower() if expected_sha256 else None
    if expected is not None and not _SHA.match(expected):
        raise BundleInvalid(f"The published SHA-256 for {url} is not a 64-digit hex digest.")
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "bundle.mcpb"
    part = dest / "bundle.mcpb.part"
    digest, size = hashlib.sha256(), 0
    part.unlink(missing_ok=True)  # a link planted there (a server's own folder) is removed, never written through
    try:
        with open(part, "xb") as out:
            async with aclosing(_chunks(url, http, max_bytes, allow_file)) as chunks:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > max_bytes:
                        raise _too_big(url, max_bytes)
                    digest.update(chunk)
                    out.write(chunk)
        got = digest.hexdigest()
        if expected is not None and got != expected:
            raise BundleInvalid(
                f"The bundle from {url} does not match its published SHA-256: expected {expected}, got {got}."
            )
        os.replace(part, target)
        return target
    except BaseException:
        part.unlink(missing_ok=True)
        raise


# --- unpack ---------------------------------------------------------------------------


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _escapes(name: str) -> BundleInvalid:
    return BundleInvalid(f"The bundle member '{name}' points outside the bundle; refusing to unpack it.")


def _member_path(name: str, root: Path) -> Path:
    """Where a zip member lands under ``root``, or BundleInvalid if it would escape."""
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
        raise _escapes(name)
    target = root.joinpath(*[p for p in parts if p not in ("", ".")])
    if not _inside(target.resolve(), root):
        raise _escapes(name)
    return target


def _extract(zf: zipfile.ZipFile, info: zipfile.ZipInfo, root: Path, budget: int) -> int:
    """Extract one member safely; return the bytes written."""
    dest = _member_path(info.filename, root)
    mode = info.external_attr >> 16
    if info.is_dir():
        dest.mkdir(parents=True, exist_ok=True)
        return 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not _inside(dest.parent.resolve(), root):
        raise _escapes(info.filename)
    if dest.is_symlink() or dest.is_file():
        dest.unlink()  # never write through an existing link
    if stat.S_ISLNK(mode):
        link = zf.read(info).decode("utf-8", "replace")
        lexical = Path(os.path.normpath(dest.parent / link))
        if os.path.isabs(link) or not _inside(lexical, root) or not _inside((dest.parent / link).resolve(), root):
            raise BundleInvalid(f"The bundle member '{info.filename}' is a symlink pointing outside the bundle.")
        os.symlink(link, dest)
        return 0
    written = 0
    with zf.open(info) as src, open(dest, "wb") as out:
        for chunk in iter(lambda: src.read(_CHUNK), b""):
            written += len(chunk)
            if written > budget:
                raise BundleInvalid("The bundle unpacks to more than the size limit; refusing it.")
            out.write(chunk)
    os.chmod(dest, 0o755 if mode & 0o111 else 0o644)
    return written


def unpack_bundle(archive: Path, target_dir: Path, *, max_bytes: int = DEFAULT_MAX_UNPACKED) -> Path:
    """Extract ``archive`` into ``target_dir`` and return ``target_dir``.

    Refuses (BundleInvalid, naming the member) absolute paths, ``..`` and symlinks that
    point outside ``target_dir``; keeps executable bits (0o755) and drops every other mode
    bit. A ``binary`` server's entry point is made executable even if the zip lost its mode.
    On failure ``target_dir`` may hold a partial tree: the caller removes it.
    """
    _check_member_count(archive)
    target_dir.mkdir(parents=True, exist_ok=True)
    root = target_dir.resolve()
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BundleInvalid("The bundle is not a valid zip archive.") from exc
    budget = max_bytes
    with zf:
        members = zf.infolist()
        _check_sizes(members, max_bytes)  # the central directory's word, before anything is written
        for info in members:
            try:
                budget -= _extract(zf, info, root, budget)
            except (OSError, zipfile.BadZipFile, EOFError) as exc:
                raise BundleInvalid(f"Could not unpack the bundle member '{info.filename}': {exc}.") from exc
    _check_links(root)
    _make_entry_executable(root)
    return target_dir


def _check_member_count(archive: Path) -> None:
    """Refuse a bundle whose end-of-central-directory record counts more than :data:`MAX_MEMBERS`
    members, before the directory itself is parsed (a 100,000-member bundle took minutes)."""
    try:
        with open(archive, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - (22 + 65535)))
            tail = fh.read()
    except OSError:
        return  # ZipFile says what is wrong
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) < at + 22:
        return
    total = int.from_bytes(tail[at + 10 : at + 12], "little")
    if total > MAX_MEMBERS and total != 0xFFFF:  # 0xFFFF: ZIP64, counted from the parsed directory
        raise BundleInvalid(f"The bundle has {total:,} members, more than the {MAX_MEMBERS:,} allowed; refusing it.")


def _check_sizes(members: list[zipfile.ZipInfo], max_bytes: int) -> None:
    """Refuse too many members, or declared sizes over ``max_bytes`` in all (a zip bomb), before
    anything is written; a member cannot unpack to more than its declared size."""
    if len(members) > MAX_MEMBERS:
        raise BundleInvalid(
            f"The bundle has {len(members):,} members, more than the {MAX_MEMBERS:,} allowed; refusing it."
        )
    if sum(info.file_size for info in members) > max_bytes:
        raise BundleInvalid("The bundle unpacks to more than the size limit; refusing it.")


def _check_links(root: Path) -> None:
    """Every symlink of the unpacked tree, followed all the way, must stay inside ``root``.

    Checking each link as it is written is not enough: ``b -> a/..`` is harmless until a
    later member makes ``a -> .``, and then ``b`` names the parent of the bundle.
    """
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink() and not _inside(Path(os.path.realpath(path)), root):
                member = path.relative_to(root).as_posix()
                raise BundleInvalid(f"The bundle member '{member}' is a symlink pointing outside the bundle.")


def bundle_manifest(archive: Path) -> Manifest:
    """The manifest of a fetched bundle, read from the zip without unpacking anything."""
    _check_member_count(archive)
    try:
        with zipfile.ZipFile(archive) as zf:
            try:
                info = zf.getinfo("manifest.json")
            except KeyError:
                raise BundleInvalid("The bundle has no manifest.json at its top level.") from None
            if info.file_size > MAX_MANIFEST_BYTES:
                raise BundleInvalid(f"The bundle's manifest.json is larger than the {MAX_MANIFEST_BYTES}-byte limit.")
            with zf.open(info) as fh:
                raw = fh.read(MAX_MANIFEST_BYTES + 1)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise BundleInvalid("The bundle is not a valid zip archive.") from exc
    return parse_manifest(raw)


def _make_entry_executable(root: Path) -> None:
    try:
        manifest = read_manifest(root)
    except BundleInvalid:
        return  # read_manifest reports it properly later
    if manifest.server.type == "binary" and manifest.server.entry_point:
        entry = (root / manifest.server.entry_point).resolve()
        if _inside(entry, root) and entry.is_file():
            os.chmod(entry, entry.stat().st_mode | 0o755)
