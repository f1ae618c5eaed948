"""Shared test fixtures: isolation of every test's state, a private keyring, process checks,
and ``database_url``: each test that takes it runs on embedded SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import keyring.backend
import keyring.errors
import pytest

# The shared helpers assert too: their failures are explained like a test's own (before they load).
pytest.register_assert_rewrite("tests.helpers", "tests.browser")

from tests.helpers.timeouts import ENV as TIMEOUT_SCALE_ENV  # noqa: E402 - after the rewrite is registered
from tests.helpers.timeouts import SCALE as TIMEOUT_SCALE  # noqa: E402

pytest_plugins = ["tests.helpers.registry_fixtures", "tests.helpers.runtime", "tests.helpers.slow_first"]

#: A throwaway PostgreSQL cluster (scripts/test.sh starts one); read before the isolation
#: fixture clears every MCP_SETUP_* variable.
POSTGRES_URL = os.environ.get("MCP_SETUP_TEST_POSTGRES_URL") or None
_IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


#: Where a stuck test's stacks go when it runs in a pytest-xdist worker (whose own stdout and
#: stderr are discarded): one file per worker, shown in the controller's report of the crash.
STACKS_DIR_ENV = "MCP_SETUP_TEST_STACKS_DIR"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    _scale_the_test_timeout(config)
    if STACKS_DIR_ENV not in os.environ:  # the controller (or a run without workers) decides
        os.environ[STACKS_DIR_ENV] = str(config._tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        _stacks_to_a_file(config, Path(os.environ[STACKS_DIR_ENV]) / f"stacks-{workerinput['workerid']}.txt")


def _scale_the_test_timeout(config: pytest.Config) -> None:
    """pytest-timeout's per-test bound (``timeout`` in pyproject.toml, thread method: a stuck
    test ends with every thread's stack) grows with the tests' one scale factor
    (tests/helpers/timeouts.py). A bound given on the command line or in PYTEST_TIMEOUT is taken as is."""
    if TIMEOUT_SCALE == 1.0 or config.getvalue("timeout") is not None or os.environ.get("PYTEST_TIMEOUT"):
        return
    base = getattr(config, "_env_timeout", None)  # pytest-timeout's setting, read in its own pytest_configure
    if base:
        config._env_timeout = base * TIMEOUT_SCALE  # type: ignore[attr-defined]


def _stacks_to_a_file(config: pytest.Config, path: Path) -> None:
    """In a worker: pytest-timeout's dump (it writes to the terminal, which a worker does not
    have) and faulthandler's (SIGABRT from scripts/test.sh's bound on the whole run) go to
    ``path``, which the controller adds to the report of the crash."""
    import faulthandler

    path.parent.mkdir(parents=True, exist_ok=True)
    out = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - open for the worker's life
    config.get_terminal_writer()._file = out  # type: ignore[attr-defined]
    faulthandler.enable(file=out, all_threads=True)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: object) -> None:
    """A worker died (pytest-timeout ends a stuck test with ``os._exit``): its stacks go into the report."""
    worker = getattr(report, "node", None)
    gateway = getattr(worker, "gateway", None)
    if gateway is None or STACKS_DIR_ENV not in os.environ:
        return
    path = Path(os.environ[STACKS_DIR_ENV]) / f"stacks-{gateway.id}.txt"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    start = text.find("+ Timeout +")  # pytest-timeout's dump (the file also holds the worker's own terminal output)
    if start >= 0:
        start = text.rfind("\n", 0, start) + 1
        report.longrepr = f"{report.longrepr}\n{text[start:][-200_000:]}"


def pytest_report_header(config: pytest.Config) -> str:
    timeout = getattr(config, "_env_timeout", None)
    return f"hang guards: {TIMEOUT_SCALE_ENV}={TIMEOUT_SCALE:g}, per-test timeout {timeout:g} s" if timeout else ""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own XDG dirs and MCP_SETUP_HOME, and no keyring backend forced by the
    host; nothing touches the real home."""
    base = tmp_path_factory.mktemp("home")
    for var in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        path = base / var.lower()
        path.mkdir()
        monkeypatch.setenv(var, str(path))
    monkeypatch.setenv("MCP_SETUP_HOME", str(base / "mcp-setup"))
    for var in list(os.environ):
        if var.startswith("MCP_SETUP_") and var != "MCP_SETUP_HOME":
            monkeypatch.delenv(var)
    monkeypatch.delenv("PYTHON_KEYRING_BACKEND", raising=False)  # keyring's own choice, not the host's
    # Tests that are not about consent run without the consent step; tests/**/test_consent*.py and
    # the consent face tests ask for it (Settings(consent="ask"), MCP_SETUP_CONSENT=ask).
    monkeypatch.setenv("MCP_SETUP_CONSENT", "never-ask")
    return base


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A working keyring that lives in this object only: each test its own."""

    priority = -1  # type: ignore[assignment]  # never chosen by keyring's own discovery

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        if self.passwords.pop((service, username), None) is None:
            raise keyring.errors.PasswordDeleteError("not found")


@pytest.fixture
def memory_keyring() -> MemoryKeyring:
    return MemoryKeyring()


@pytest.fixture
def canary() -> str:
    """A unique secret value to plant and then look for everywhere it must not be."""
    return "canary-" + uuid.uuid4().hex


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The store's database URL: ``None`` (the embedded SQLite default in the data dir) or a
    fresh, empty PostgreSQL database of its own, dropped afterwards."""
    if request.param == "sqlite":
        yield None
        return
    _require_postgres()
    with postgres_database() as url:
        yield url


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for a test about a database server (SQLite has none)."""
    _require_postgres()
    with postgres_database() as url:
        yield url


def _require_postgres() -> None:
    if POSTGRES_URL is None:
        why = "MCP_SETUP_TEST_POSTGRES_URL is not set: run scripts/test.sh, which starts a throwaway PostgreSQL"
        if _IN_CI:
            pytest.fail(f"PostgreSQL is required under CI=true: {why}")
        pytest.skip(why)


def postgres_database() -> AbstractContextManager[str]:
    """A new empty database on the test cluster; dropped (its sessions ended) on exit."""
    from tests.helpers.postgres_databases import throwaway_database

    assert POSTGRES_URL is not None
    return throwaway_database(POSTGRES_URL)


@pytest.fixture(autouse=True)
def restored_logging() -> Iterator[None]:
    """A test that runs the CLI in-process (``app.cli.main.main``) reconfigures logging globally
    (root handlers, quiet library loggers): put it back, so later tests see what they log."""
    import logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    names = ("httpx", "httpcore", "httpx2", "mcp", "uvicorn.access", "alembic")
    levels = {name: logging.getLogger(name).level for name in names}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, saved in levels.items():
        logging.getLogger(name).setLevel(saved)
