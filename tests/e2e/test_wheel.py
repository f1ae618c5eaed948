"""A non-editable install (``pip install .``, a built wheel) carries the page and the agent
definitions: the top-level ``ui/`` and ``agents/`` folders, which the build maps into ``app/ui``
and ``setup_agent/agent/agents`` (hatchling's ``force-include`` in pyproject.toml).

The wheel is built by the project's own backend (no build isolation: nothing is downloaded)
from a copy of the project in a temp dir, so the build leaves nothing in the repo. It is
installed into a fresh venv outside the checkout, whose own ``mcp-setup`` script then serves
the page and names the agent it would run (the libraries come from the test venv through a
``.pth`` line, so the checkout is not on that venv's path).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.browser.serve import start_serve, stop_serve
from tests.helpers.mcp_face import REPO
from tests.helpers.timeouts import scaled

PAGE = REPO / "ui"
AGENT_DEFS = REPO / "agents"
#: Where the build puts each top-level folder inside the wheel.
MAPPED = {"ui/": "app/ui/", "agents/": "setup_agent/agent/agents/"}
_NOT_SOURCE = shutil.ignore_patterns(
    ".git",
    ".venv",
    "__pycache__",
    "*.pyc",
    "*.egg-info",
    "build",
    "dist",
    "node_modules",
    ".pytest_cache",
    "test-artifacts",
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
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "-q",
            "-w",
            str(out),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=scaled(180),
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("mcp_setup-*.whl")
    return built


def test_a_wheel_built_from_the_project_carries_the_page_and_the_agent_definitions(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    page, agent_defs = _shipped(PAGE), _shipped(AGENT_DEFS)
    # The anchors the faces name, so an empty folder cannot pass.
    for name in ("ui/index.html", "ui/app.css", "ui/js/app.js", "ui/js/api.js"):
        assert name in page
    assert {"agents/mcp_setup.toml", "agents/mcp_setup/prompt.md"} <= set(agent_defs)
    assert len([n for n in page if n.startswith("ui/js/") and n.endswith(".js")]) >= 10
    inside = {next(MAPPED[top] + n[len(top) :] for top in MAPPED if n.startswith(top)) for n in page + agent_defs}
    missing = sorted(inside - names)
    assert not missing, f"the wheel lacks {missing}"
    assert not any(n.startswith(("ui/", "agents/", "tests/")) for n in names)


def _fresh_venv(root: Path, wheel: Path) -> Path:
    """A new venv (outside the checkout) with the wheel installed; returns its bin dir."""
    venv = root / "venv"
    made = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], capture_output=True, text=True, timeout=scaled(120)
    )
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            "-q",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=scaled(180),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    # The dependencies (fastapi, the SDK, …) from the test venv: a plain path line adds that
    # folder without running its .pth files, so the checkout's editable install stays out.
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv / "bin"


def test_an_installed_wheel_serves_the_page_and_finds_the_setup_agent(wheel: Path, tmp_path: Path) -> None:
    bin_dir = _fresh_venv(tmp_path, wheel)
    target = Path(
        subprocess.check_output(
            [str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    # The folders resolve inside the installed packages (not the repo next to the tests).
    where = subprocess.run(
        [
            str(bin_dir / "python"),
            "-c",
            "import json, app.web.app as w, setup_agent.agent.archetypes as a;"
            "print(json.dumps([w.__file__, str(w.ui_dir()), str(a.agents_dir()), sorted(a.load_archetypes().agents)]))",
        ],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=tmp_path,
        env={"PATH": ""},
    )
    assert where.returncode == 0, where.stderr
    web_file, ui_dir, agents_dir, agent_ids = json.loads(where.stdout)
    for path in (web_file, ui_dir, agents_dir):
        assert Path(path).is_relative_to(target), path
    assert agent_ids == ["mcp_setup"]

    # `mcp-setup agent --help` of the installed script names the agent from the installed definition.
    helped = subprocess.run(
        [str(bin_dir / "mcp-setup"), "agent", "--help"],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=tmp_path,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},  # a checkout on the path would win
    )
    assert helped.returncode == 0, helped.stderr
    assert "mcp_setup (guided driver)" in helped.stdout
    assert f"defined in {target / 'setup_agent' / 'agent' / 'agents' / 'mcp_setup.toml'}" in helped.stdout

    # A mark only the installed copy has: the page served must be that copy.
    installed_page = target / "app" / "ui" / "index.html"
    installed_page.write_text(installed_page.read_text() + "<!-- from the installed wheel -->\n")
    served = start_serve(tmp_path, argv=[str(bin_dir / "mcp-setup")], PYTHONPATH=str(target))  # not the repo
    try:
        with served.client() as http:
            page = http.get(f"/?t={served.token}")
            assert page.status_code == 200 and "<!-- from the installed wheel -->" in page.text
            scripts = sorted(p.name for p in (target / "app" / "ui" / "js").glob("*.js"))
            assert len(scripts) >= 10
            for name in ("app.css", *scripts):
                asset = http.get(f"/static/{name}", headers=served.headers())
                assert asset.status_code == 200, name
        listed = served.rpc("tool_registry_list")["result"]["tools"]
        search = next(tool for tool in listed if tool["tool_id"] == "mcp_setup.search")
        assert search["allowed_agents"] == ["mcp_setup"]  # the allowlist of the shipped agent
    finally:
        assert stop_serve(served) == 0, served.stderr()
