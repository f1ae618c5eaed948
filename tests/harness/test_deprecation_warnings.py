"""A DeprecationWarning raised from the project's own modules fails the test that raised it.

The suite's pytest configuration (``filterwarnings`` in pyproject.toml) ignores a library's own
deprecations and turns ours into errors. The test runs a small test file in a fresh pytest with
that configuration, so a change that drops or loosens the setting fails here rather than going
unnoticed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO
from tests.helpers.timeouts import scaled

# Each test runs code whose module is named as one of ours (or a library's): the warnings
# machinery attributes a warning to the ``__name__`` of the frame that raises it.
WARNS = """
import types
import warnings

import pytest


def _module(name):
    module = types.ModuleType(name)
    exec(
        "import warnings\\n"
        "def old():\\n"
        "    warnings.warn('old() is deprecated', DeprecationWarning, stacklevel=1)\\n",
        module.__dict__,
    )
    return module


@pytest.mark.parametrize(
    "name", ["setup_agent.secrets.old_api", "app.cli.old_api", "registry_clients.old_api", "tests.helpers.old_api"]
)
def test_ours(name):
    _module(name).old()


def test_a_library_of_ours_in_name_only():
    _module("setup_agent_like_but_not_ours").old()


def test_a_library():
    _module("somelibrary.compat").old()
"""


def test_a_deprecation_warning_from_a_project_module_fails_its_test_and_a_librarys_does_not(tmp_path: Path) -> None:
    (tmp_path / "test_warns.py").write_text(WARNS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MCP_SETUP_TEST_", "PYTHONWARNINGS"))}
    env["COLUMNS"] = "400"  # the summary lines whole
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(REPO / "pyproject.toml"),
        "--rootdir",
        str(tmp_path),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-rA",
        str(tmp_path / "test_warns.py"),
    ]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(60))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    for name in ("setup_agent.secrets.old_api", "app.cli.old_api", "registry_clients.old_api", "tests.helpers.old_api"):
        assert f"FAILED test_warns.py::test_ours[{name}] - DeprecationWarning: old() is deprecated" in out, out
    assert "PASSED test_warns.py::test_a_library_of_ours_in_name_only" in out, out
    assert "PASSED test_warns.py::test_a_library\n" in out, out
    assert "4 failed, 2 passed" in out, out
