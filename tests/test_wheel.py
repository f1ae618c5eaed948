"""A non-editable install (``pip install .``, a built wheel) carries the page and the agent
definitions: they are package data of ``app`` (``app/ui/``) and ``setup_agent``
(``setup_agent/agent_defs/``), declared in pyproject.toml.

The wheel is built by the real setuptools backend (no build isolation: nothing is downloaded)
from a copy of the project in a temp dir, so the build leaves no ``build/`` or ``egg-info`` in
the repo; it is installed by pip into a temp target and served from there by ``mcp-setup serve``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.browser.serve import start_serve, stop_serve
from tests.mcp_face import REPO, mcp_setup_argv

PAGE = REPO / "app" / "ui"
AGENT_DEFS = REPO / "setup_agent" / "agent_defs"
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.pyc", "*.egg-info", "build", "dist", "node_modules",
    ".pytest_cache", "test-artifacts",
)


def _shipped(directory: Path) -> list[str]:
    """Every file of ``directory`` as a wheel names it (relative to the repo, ``/``-separated)."""
    return sorted(
        path.relative_to(REPO).as_posix()
        for path in directory.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    )


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE)
    out = root / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "-q", "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=180, cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("mcp_setup-*.whl")
    return built


def test_a_wheel_built_from_the_project_carries_the_page_and_the_agent_definitions(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    page, agent_defs = _shipped(PAGE), _shipped(AGENT_DEFS)
    # The anchors the faces name, so an empty folder cannot pass.
    for name in ("app/ui/index.html", "app/ui/app.css", "app/ui/js/app.js", "app/ui/js/api.js"):
        assert name in page
    assert {"setup_agent/agent_defs/mcp_setup.toml", "setup_agent/agent_defs/mcp_setup/prompt.md"} <= set(agent_defs)
    assert len([n for n in page if n.startswith("app/ui/js/") and n.endswith(".js")]) >= 10
    missing = sorted(set(page + agent_defs) - names)
    assert not missing, f"the wheel lacks {missing}"
    assert not any(n.startswith(("ui/", "agents/", "tests/")) for n in names)


def test_an_installed_wheel_serves_the_page_and_finds_the_setup_agent(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
         "-q", "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The path constants resolve inside the installed packages (not the repo next to the tests).
    where = subprocess.run(
        [sys.executable, "-P", "-c",
         "import json, app.web as w, setup_agent.agents as a;"
         "print(json.dumps([w.__file__, str(w.UI_DIR), str(a.AGENTS_DIR), sorted(a.load_archetypes().agents)]))"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": ""},
    )
    assert where.returncode == 0, where.stderr
    web_file, ui_dir, agents_dir, agent_ids = json.loads(where.stdout)
    for path in (web_file, ui_dir, agents_dir):
        assert Path(path).is_relative_to(target), path
    assert agent_ids == ["mcp_setup"]

    # A mark only the installed copy has: the page served must be that copy.
    installed_page = target / "app" / "ui" / "index.html"
    installed_page.write_text(installed_page.read_text() + "<!-- from the installed wheel -->\n")
    assert Path(mcp_setup_argv()[0]).name == "mcp-setup"  # the script: the repo is not on its sys.path
    served = start_serve(tmp_path, PYTHONPATH=str(target))
    try:
        with served.client() as http:
            page = http.get(f"/?t={served.token}")
            assert page.status_code == 200 and "<!-- from the installed wheel -->" in page.text
            for name in ("app.css", "app.js", "secret_modal.js"):
                asset = http.get(f"/static/{name}", headers=served.headers())
                assert asset.status_code == 200, name
        listed = served.rpc("tool_registry_list")["result"]["tools"]
        search = next(tool for tool in listed if tool["tool_id"] == "mcp_setup.search")
        assert search["allowed_agents"] == ["mcp_setup"]  # the allowlist of the shipped agent
    finally:
        assert stop_serve(served) == 0, served.stderr()
