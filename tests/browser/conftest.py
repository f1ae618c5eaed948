"""Browser fixtures: Debian's Chromium driven by PyPI ``playwright`` (never ``playwright install``).

The browser tests never skip: without ``/usr/bin/chromium`` they fail and say how to install it
(``scripts/test.sh`` installs it in CI).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.mcp_face import REPO
from tests.helpers.timeouts import scaled

CHROMIUM = Path(os.environ.get("MCP_SETUP_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",  # containers often have a tiny /dev/shm
]
ARTIFACTS = REPO / "test-artifacts" / "browser"


def _chromium() -> Path:
    if not CHROMIUM.exists() and not shutil.which("chromium"):
        pytest.fail(
            f"Chromium is missing ({CHROMIUM}): install Debian's package with "
            "`sudo apt-get install -y chromium` (scripts/test.sh does this), then run the tests again. "
            "Do not run `playwright install`.",
            pytrace=False,
        )
    return CHROMIUM if CHROMIUM.exists() else Path(shutil.which("chromium") or "")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    executable = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("PyPI playwright is missing: pip install -e '.[test]'", pytrace=False)
    home = tmp_path_factory.mktemp("chromium-home")
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "PATH": os.environ.get("PATH", ""),
        "LANG": "en_US.UTF-8",
        "TZ": "UTC",
    }
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS, env=env, timeout=scaled(30_000))
        try:
            yield b
        finally:
            b.close()
