"""Take the README's picture of the page: ``docs/images/consent.png``.

    .venv/bin/python scripts/screenshot.py [--out docs/images/consent.png]

It runs a real ``mcp-setup serve`` on a throwaway data folder whose only registry is a local
catalog with one example server (a small MCPB bundle built on the spot, wanting
``WEATHER_API_KEY``), and drives Debian's Chromium (``apt-get install chromium``; PyPI
``playwright`` from the test extras, never ``playwright install``) as a person would: "Add MCP
server…", the goal, the key in the password box, then the consent that shows what will run.
Run it again after a change to the page and commit the new PNG.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.browser.serve import start_serve, stop_serve  # noqa: E402  (the tests' way to run serve)
from tests.stub_server.bundle import sha256_hex  # noqa: E402

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"]
NAME = "io.github.example/weather"
KEY = "WEATHER_API_KEY"
VIEWPORT = {"width": 1280, "height": 860}
MANIFEST = {  # an MCPB bundle as a publisher writes one; the picture is taken before it would run
    "manifest_version": "0.3",
    "name": "weather",
    "display_name": "Weather",
    "version": "1.2.0",
    "description": "Weather forecasts and alerts for any city.",
    "author": {"name": "Example"},
    "server": {
        "type": "python",
        "entry_point": "server/server.py",
        "mcp_config": {
            "command": "python3",
            "args": ["${__dirname}/server/server.py"],
            "env": {KEY: "${user_config.api_key}"},
        },
    },
    "tools": [{"name": "forecast", "description": "The forecast for a city."}],
    "user_config": {
        "api_key": {
            "type": "string",
            "title": KEY,
            "description": "Your weather service API key.",
            "required": True,
            "sensitive": True,
        }
    },
}


def _catalog(root: Path) -> Path:
    """A local catalog whose one entry is the weather bundle (an official-registry server.json)."""
    import json
    import zipfile

    bundle = root / "dist" / "weather-1.2.0.mcpb"
    bundle.parent.mkdir(parents=True)
    with zipfile.ZipFile(bundle, "w") as zf:
        when = (2025, 1, 1, 0, 0, 0)  # a steady sha256, so a retake changes only what the page changed
        zf.writestr(zipfile.ZipInfo("manifest.json", when), json.dumps(MANIFEST, indent=2))
        zf.writestr(zipfile.ZipInfo("server/server.py", when), "raise SystemExit('an example: never run')\n")
    package = {
        "registryType": "mcpb",
        "identifier": bundle.resolve().as_uri(),
        "version": "1.2.0",
        "fileSha256": sha256_hex(bundle.read_bytes()),
        "transport": {"type": "stdio"},
        "environmentVariables": [
            {"name": KEY, "description": "Your weather service API key.", "isRequired": True, "isSecret": True}
        ],
    }
    doc = {
        "name": NAME,
        "description": "Weather forecasts and alerts for any city.",
        "version": "1.2.0",
        "packages": [package],
    }
    catalog = root / "catalog"
    catalog.mkdir(parents=True)
    (catalog / "weather.json").write_text(json.dumps(doc))
    return catalog


def take(out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    chromium = os.environ.get("MCP_SETUP_TEST_CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        chromium = shutil.which("chromium") or sys.exit("Chromium is missing: sudo apt-get install -y chromium")
    key_value = "wk-" + os.urandom(8).hex()
    with tempfile.TemporaryDirectory(prefix="mcp-setup-shot-") as tmp:
        root = Path(tmp)
        served = start_serve(root, _catalog(root), MCP_SETUP_CONSENT="ask")
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, env={"HOME": tmp})
                page = browser.new_context(viewport=VIEWPORT, locale="en-US", timezone_id="UTC").new_page()
                page.set_default_timeout(60_000)
                page.goto(served.url)
                expect(page.locator("#conn")).to_have_text("Connected")
                page.get_by_role("button", name="Add MCP server…").click()
                goal = page.get_by_label("What do you want to set up?")
                goal.fill("set up the weather server")
                goal.press("Enter")
                secret = page.get_by_role("dialog", name=re.compile(f"Enter your {KEY}"))
                secret.get_by_label(f"Your {KEY}").fill(key_value)
                secret.get_by_role("button", name="Save").click()
                consent = page.get_by_role("dialog", name=re.compile(r"Allow mcp-setup to test"))
                expect(consent).to_be_visible()
                expect(consent).to_contain_text(NAME)
                # The bundle's file:// address names the temp folder: show a steady one instead.
                page.evaluate(
                    """([tmp]) => { const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
                       for (let n; (n = walk.nextNode()); ) n.nodeValue = n.nodeValue.split(tmp).join('/srv'); }""",
                    [tmp],
                )
                assert key_value not in page.content()
                consent.evaluate("d => { d.scrollTop = 0; }")  # its title, not the focused button, in view
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out))
                browser.close()
        finally:
            stop_serve(served)


def main() -> int:
    cli = argparse.ArgumentParser(description="Take the README's screenshot of the consent in the page.")
    cli.add_argument("--out", type=Path, default=REPO / "docs" / "images" / "consent.png")
    take(cli.parse_args().out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
