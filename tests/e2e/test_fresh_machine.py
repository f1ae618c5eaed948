"""On a machine with only Python: a fresh virtual environment made by the README's command
(``python3 -m venv .venv && .venv/bin/pip install -e .``), with no ``node``, ``npx``, ``npm``,
``uv`` or ``uvx`` on PATH, tests and installs a real npm server (``server-everything``) and a
real PyPI server (``mcp-server-time``) through its own ``mcp-setup``: the runners that come with
mcp-setup (Node and uv from PyPI) run them.

The venv is new and sees nothing of the test venv (no ``--system-site-packages``, no ``.pth``,
no ``PYTHONPATH``). Its packages come from PyPI through this machine's configured index, as
wheels kept in a wheelhouse under the user's cache (``~/.cache/mcp-setup-tests``, one per
set of requirements, made once by ``pip wheel``); the README's command then runs against that
wheelhouse only (``--no-index --find-links``), so a rerun downloads nothing and the install
is the same one; the person's HOME there keeps npm's and uv's caches too. PATH is a folder of
links to the few system programs a start needs, and ``python3`` (a machine with only Python
has it); inside the sandbox the system's folders end the server's PATH. This machine's
certificate settings are kept (its network inspects TLS).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.official_registry import FakeOfficialRegistry
from tests.helpers.mcp_face import REPO
from tests.helpers.registry_entries import SCHEMA, everything_entry
from tests.helpers.timeouts import scaled

#: A PyPI server maintained with the SDK (its latest release when this test was written).
TIME_VERSION = "2026.10.19"
RUNNERS = ("node", "npx", "npm", "uv", "uvx")
#: What a start may need from the system, linked into the test's PATH (never a runner).
SYSTEM_TOOLS = ("sh", "bash", "env", "uname", "cat", "ls", "mkdir", "rm", "bwrap", "socat", "pasta", "passt")
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.pyc", "*.egg-info", "build", "dist", "node_modules", "test-artifacts"
)
#: This machine's own certificate settings (a network that inspects TLS): the person's, kept.
_CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "REQUESTS_CA_BUNDLE")


def time_entry() -> dict:
    return {
        "$schema": SCHEMA,
        "name": "io.github.modelcontextprotocol/time",
        "description": "Time and timezone conversion.",
        "version": TIME_VERSION,
        "packages": [
            {
                "registryType": "pypi",
                "identifier": "mcp-server-time",
                "version": TIME_VERSION,
                "runtimeHint": "uvx",
                "transport": {"type": "stdio"},
            }
        ],
    }


def _requirements() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    return sorted({*project["build-system"]["requires"], *project["project"]["dependencies"], "editables"})


#: The user's cache, read at import: during a test the isolation fixture points XDG_CACHE_HOME at
#: the test's own empty folder, where a cache would be thrown away after every run.
CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mcp-setup-tests"


def _wheelhouse() -> Path:
    """The wheels of every requirement (and of the build backend), fetched once per set."""
    requirements = _requirements()
    key = hashlib.sha256(json.dumps([sys.version_info[:2], requirements]).encode()).hexdigest()[:16]
    cache = CACHE_ROOT
    house = cache / f"wheelhouse-{key}"
    if (house / "complete").is_file():
        return house
    cache.mkdir(parents=True, exist_ok=True)
    building = cache / f"wheelhouse-{key}.{os.getpid()}"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "-w", str(building), *requirements],
        capture_output=True,
        text=True,
        timeout=scaled(600),
        cwd=cache,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (building / "complete").write_text("\n".join(requirements) + "\n")
    try:
        building.rename(house)  # another worker may have finished first: its copy is as good
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return house


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """A copy of the checkout with ``.venv`` made by the README's command, and a PATH with no runner."""
    root = tmp_path_factory.mktemp("fresh")
    house = _wheelhouse()
    checkout = root / "mcp-setup"
    shutil.copytree(REPO, checkout, ignore=_NOT_SOURCE)
    # The venv from this Python (the wheelhouse's version; a venv made from a venv is as fresh).
    made = subprocess.run(
        [sys.executable, "-m", "venv", ".venv"], cwd=checkout, capture_output=True, text=True, timeout=scaled(120)
    )
    assert made.returncode == 0, made.stderr
    pip_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_FIND_LINKS")}
    installed = subprocess.run(
        # --no-compile: the same files, compiled on first import instead of now (a third of the time)
        [".venv/bin/pip", "install", "-q", "--no-compile", "--no-index", "--find-links", str(house), "-e", "."],
        cwd=checkout,
        env=pip_env,
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for tool in SYSTEM_TOOLS:
        found = shutil.which(tool, path="/usr/bin:/bin:/usr/sbin:/sbin")
        if found:
            (bin_dir / tool).symlink_to(found)
    (bin_dir / "python3").symlink_to(shutil.which("python3", path="/usr/bin:/bin") or sys.executable)
    yield {"root": root, "checkout": checkout, "bin": bin_dir}


def _run(fresh: dict[str, Path], env: dict[str, str], *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(fresh["checkout"] / ".venv" / "bin" / "mcp-setup"), *args],
        env=env,
        cwd=fresh["root"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(scaled(600))  # a first run fills the wheelhouse from PyPI
def test_a_fresh_venv_with_no_node_or_uv_on_path_tests_and_installs_an_npm_and_a_pypi_server(
    fresh: dict[str, Path], tmp_path: Path
) -> None:
    path = str(fresh["bin"])
    assert all(shutil.which(runner, path=path) is None for runner in RUNNERS), os.listdir(path)
    home = CACHE_ROOT / "home"  # npm's and uv's caches: a rerun downloads the packages no more
    home.mkdir(parents=True, exist_ok=True)
    with FakeOfficialRegistry([everything_entry(), time_entry()]) as registry:
        env = {
            "PATH": path,
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "MCP_SETUP_HOME": str(tmp_path / "data"),
            "XDG_DATA_HOME": str(tmp_path / "xdg-data"),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
            "MCP_SETUP_REGISTRIES": "official",
            "MCP_SETUP_OFFICIAL_REGISTRY_URL": registry.url,
            "MCP_SETUP_PROBE_TIMEOUT_SECONDS": str(scaled(120)),
            **{k: os.environ[k] for k in _CA_VARS if k in os.environ},
        }
        doctor = _run(fresh, env, "doctor", "--json", timeout=scaled(120))
        runtimes = {
            c["name"]: c["detail"] for c in json.loads(doctor.stdout)["checks"] if c["name"].startswith("runtime")
        }
        assert "bundled with mcp-setup" in runtimes["runtime npx"], runtimes
        assert "bundled with mcp-setup" in runtimes["runtime uvx"], runtimes
        for name in ("io.github.modelcontextprotocol/server-everything", "io.github.modelcontextprotocol/time"):
            added = _run(fresh, env, "add", name, "--yes", timeout=scaled(300))
            assert added.returncode == 0, (added.stdout[-3000:], added.stderr[-3000:])
        listed = _run(fresh, env, "list", "--json", timeout=scaled(60))
    assert listed.returncode == 0, listed.stderr
    servers = {s["qualified_name"]: s for s in json.loads(listed.stdout)["servers"]}
    assert set(servers) == {"io.github.modelcontextprotocol/server-everything", "io.github.modelcontextprotocol/time"}
    assert servers["io.github.modelcontextprotocol/server-everything"]["package_type"] == "npm"
    assert servers["io.github.modelcontextprotocol/time"]["package_type"] == "pypi"
