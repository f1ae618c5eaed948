"""The download phase's failures, read from the runner's own output: what failed, in words.

npm, uv, pip and docker each say why a download failed, in their own words, often long before
they give up (npm retries a refused connection for a minute and more). :func:`read_failure` reads
one line of that output and returns a :class:`DownloadFailure` when the line names a cause:
``final`` ones (nothing answers, no such host, a certificate not trusted, no such package or
version, a proxy refusing) stop the download at once, because no retry changes them.
:func:`download_failed` turns one into the error an agent, the page and the CLI get
(``download_failed``: "Could not download <package> from <the registry>: <cause>.").

Registries are named by their origin (scheme, host and port; never a user name or password in
a URL), taken from the line when it names one, else from the fetch's own options, else the
runner's default registry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from setup_agent.errors import DownloadFailed

__all__ = ["DownloadFailure", "download_failed", "for_a_login", "from_registry", "read_failure", "through_the_proxy"]


@dataclass(frozen=True)
class DownloadFailure:
    """Why a download failed: ``cause`` in words, ``code`` as the runner said it (``ECONNREFUSED``),
    ``registry`` the origin the line named (None: not named), ``final`` when no retry helps."""

    cause: str
    code: str
    registry: str | None = None
    final: bool = True


_REFUSED = "nothing answers there (connection refused)"
_NO_HOST = "its address could not be found (no network, or a wrong name or DNS)"
_TIMED_OUT = "it did not answer in time (no network, or a firewall)"
_RESET = "the connection was cut"
_TLS = "its certificate is not trusted here (a proxy that intercepts HTTPS? set its certificate for the runner)"
_UNREACHABLE = "the network is unreachable from this computer"
_PROXY = "the proxy refused the request (HTTP 407: it wants a user name and password)"
_ACCESS = "it refused access (a private registry that needs a token?)"
_NO_PACKAGE = "it has no such package"
_NO_VERSION = "it has no such version"

#: npm (and Node) error codes → (cause, final).
_NPM_CODES: dict[str, tuple[str, bool]] = {
    "ECONNREFUSED": (_REFUSED, True),
    "ENOTFOUND": (_NO_HOST, True),
    "EAI_AGAIN": (_NO_HOST, True),
    "ETIMEDOUT": (_TIMED_OUT, True),
    "ESOCKETTIMEDOUT": (_TIMED_OUT, True),
    "ENETUNREACH": (_UNREACHABLE, True),
    "EHOSTUNREACH": (_UNREACHABLE, True),
    "ECONNRESET": (_RESET, False),  # npm's own retry may get through
    "E404": (_NO_PACKAGE, True),
    "ETARGET": (_NO_VERSION, True),
    "E401": (_ACCESS, True),
    "E403": (_ACCESS, True),
    "E407": (_PROXY, True),
    "EPROTO": (_TLS, True),
    "SELF_SIGNED_CERT_IN_CHAIN": (_TLS, True),
    "DEPTH_ZERO_SELF_SIGNED_CERT": (_TLS, True),
    "UNABLE_TO_VERIFY_LEAF_SIGNATURE": (_TLS, True),
    "UNABLE_TO_GET_ISSUER_CERT_LOCALLY": (_TLS, True),
    "CERT_HAS_EXPIRED": (_TLS, True),
    "ERR_TLS_CERT_ALTNAME_INVALID": (_TLS, True),
}

_URL = re.compile(r"\bhttps?://[^\s'\"<>),]+")
_NPM_ATTEMPT = re.compile(r"^npm (?:http|verb|warn)?\s*fetch GET (\S+) attempt \d+ failed with ([A-Z0-9_]+)")
_NPM_CODE = re.compile(r"^npm (?:error|ERR!) code ([A-Z0-9_]+)\s*$")
_NPM_PROXY = re.compile(r"proxy", re.IGNORECASE)

#: uv's and pip's words (their causes come as "cause:" lines, pip's inside a retry warning) → cause.
_PYTHON_CAUSES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"Connection refused|\[Errno 111\]"), "ECONNREFUSED", _REFUSED),
    (
        re.compile(
            r"dns error|failed to lookup address|Name or service not known|"
            r"Temporary failure in name resolution|nodename nor servname|\[Errno -[23]\]",
            re.IGNORECASE,
        ),
        "ENOTFOUND",
        _NO_HOST,
    ),
    (
        re.compile(r"invalid peer certificate|CERTIFICATE_VERIFY_FAILED|UnknownIssuer|certificate verify", re.I),
        "TLS",
        _TLS,
    ),
    (re.compile(r"407 Proxy Authentication Required|Tunnel connection failed: 407", re.I), "E407", _PROXY),
    (re.compile(r"Network is unreachable|\[Errno 101\]"), "ENETUNREACH", _UNREACHABLE),
    (
        re.compile(r"operation timed out|timed out|Read timed out|ConnectTimeout", re.IGNORECASE),
        "ETIMEDOUT",
        _TIMED_OUT,
    ),
    (
        re.compile(
            r"\b40[13] (?:Unauthorized|Forbidden)\b|lack of valid authentication credentials|authorization fail"
        ),
        "E401",
        _ACCESS,
    ),
    (
        re.compile(r"not found in the package registry|404 Not Found|No matching distribution found"),
        "E404",
        _NO_PACKAGE,
    ),
    (re.compile(r"there is no version of|Could not find a version that satisfies"), "ETARGET", _NO_VERSION),
]
#: A uv/pip line that carries a cause (uv: ``error:`` then ``cause:`` lines; pip: ``ERROR:`` and
#: ``WARNING: Retrying … after connection broken by …``).
_PYTHON_LINE = re.compile(r"^\s*(?:error|cause|hint|ERROR|WARNING: Retrying|  ×|  ╰─▶|Caused by)", re.IGNORECASE)
#: What uv says last, after "not found": an index it could not read (a login it lacks). Its "not
#: found" waits for that hint (uv exits right after it), so it is not final there.
_UV_HINTED = ("E404", "ETARGET")

_DOCKER_CAUSES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"connection refused"), "ECONNREFUSED", _REFUSED),
    (re.compile(r"no such host|server misbehaving"), "ENOTFOUND", _NO_HOST),
    (re.compile(r"x509:|certificate"), "TLS", _TLS),
    (re.compile(r"i/o timeout|Client\.Timeout"), "ETIMEDOUT", _TIMED_OUT),
    (re.compile(r"manifest unknown|not found: manifest|repository does not exist"), "E404", _NO_PACKAGE),
    (re.compile(r"unauthorized|denied", re.IGNORECASE), "E401", _ACCESS),
]


def _origin(text: str | None) -> str | None:
    """The registry a URL names, as scheme://host[:port] (no user name, password, path or query)."""
    if not text:
        return None
    try:
        parts = urlsplit(text)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not parts.scheme or not host:
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


def read_failure(runner: str, line: str) -> DownloadFailure | None:
    """What ``line`` of ``runner``'s output (``npx``, ``uvx``, ``pip``, ``docker``) says failed, if anything."""
    text = line.rstrip("\r\n")
    if runner == "npx":
        if m := _NPM_ATTEMPT.search(text):
            known = _NPM_CODES.get(m.group(2))
            if known is None:
                return None
            cause, final = known
            return DownloadFailure(cause, m.group(2), _origin(m.group(1)), final)
        if m := _NPM_CODE.search(text):
            cause, _final = _NPM_CODES.get(m.group(1), (f"npm stopped with {m.group(1)}", True))
            return DownloadFailure(cause, m.group(1), None, True)
        return None
    if runner in ("uvx", "uv", "pip"):
        if not _PYTHON_LINE.search(text):
            return None
        for pattern, code, cause in _PYTHON_CAUSES:
            if pattern.search(text):
                url = _URL.search(text)
                final = not (runner in ("uvx", "uv") and code in _UV_HINTED)
                return DownloadFailure(cause, code, _origin(url.group(0)) if url else None, final)
        return None
    if runner == "docker":
        if "Error" not in text and "error" not in text:
            return None
        for pattern, code, cause in _DOCKER_CAUSES:
            if pattern.search(text):
                return DownloadFailure(cause, code, None, True)
    return None


def _proxied(cause: str, tail: str) -> str:
    """A connection failure through a proxy is the proxy's: npm says so in its closing lines."""
    if cause in (_REFUSED, _NO_HOST, _TIMED_OUT) and _NPM_PROXY.search(tail) and "behind a proxy" not in tail:
        return cause + " (through the proxy)"
    return cause


#: The registry each runner uses when the fetch names none.
_DEFAULT_REGISTRY = {"npx": "the npm registry", "uvx": "PyPI", "uv": "PyPI", "pip": "PyPI", "docker": "its registry"}
#: The fetch options that name the registry.
_REGISTRY_OPTIONS = ("--registry=", "--default-index=", "--index-url=", "--index=", "-i=")


def registry_of(runner: str, package: tuple[str, ...]) -> str:
    """The registry a fetch of ``package`` (a plan's ``(type, *options, spec)``) goes to, in words."""
    options = list(package[1:-1])
    for i, option in enumerate(options):
        for prefix in _REGISTRY_OPTIONS:
            if option.startswith(prefix) and (origin := _origin(option[len(prefix) :])):
                return origin
        if option in ("--default-index", "--index-url", "--index", "-i") and i + 1 < len(options):
            if origin := _origin(options[i + 1]):
                return origin
    return _DEFAULT_REGISTRY.get(runner, "its registry")


def download_failed(runner: str, package: tuple[str, ...], failure: DownloadFailure, tail: str = "") -> DownloadFailed:
    """The error for a download that ``failure`` stopped: it names the package and the registry."""
    spec = package[-1] if package else "the package"
    registry = failure.registry or registry_of(runner, package)
    cause = _proxied(failure.cause, tail) if runner == "npx" else failure.cause
    return DownloadFailed(
        f"Could not download {spec} from {registry}: {cause}.",
        details={
            "cause": cause,
            "runner_code": failure.code,
            "package": spec,
            "registry": registry,
            "failed": "package",  # the package never arrived: no server was started
        },
    )


def through_the_proxy(failure: DownloadFailure, errors: list[str]) -> DownloadFailure:
    """``failure`` as the sandbox's proxy saw it: a sandboxed download reaches its registry only
    through mcp-setup's proxy, which cuts the runner's connection when the registry cannot be
    reached, so the runner says "reset" (and would retry) where the proxy knows why (``errors``:
    its failed connections). No answer at all there is final, as it would be without the proxy."""
    if failure.code != "ECONNRESET" or not errors:
        return failure
    said = " ".join(errors).lower()
    if "refused" in said:
        return DownloadFailure(_REFUSED, "ECONNREFUSED", failure.registry, True)
    if "no answer" in said:
        return DownloadFailure(_TIMED_OUT, "ETIMEDOUT", failure.registry, True)
    return failure


def from_registry(failure: DownloadFailure, url: str) -> DownloadFailure:
    """``failure`` naming the registry at ``url`` (the package's own, as the fetch found it) when
    its line named none: npm's ``code E401`` lines name no URL, and a scoped package's registry
    (``@scope:registry=``) is no option of the fetch, which :func:`registry_of` reads."""
    origin = _origin(url)
    return failure if failure.registry is not None or origin is None else replace(failure, registry=origin)


def for_a_login(failure: DownloadFailure, given: bool, where: str) -> DownloadFailure:
    """``failure`` told as a login when the registry refused access (401, 403): the credentials
    it was ``given`` were refused, or it needs a login and none are set (``where``: where a
    person sets them for this runner, e.g. "your .npmrc"). Any other failure as it is."""
    if failure.code not in ("E401", "E403") or not where:
        return failure
    if given:
        cause = f"the registry refused the credentials set for it (in {where}: wrong or expired?)"
    else:
        cause = f"the registry needs a login, and no credentials are set for it (in {where})"
    return DownloadFailure(cause, failure.code, failure.registry, True)
