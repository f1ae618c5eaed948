"""``mcp-setup open``: the page link of the ``mcp-setup serve`` running on this data folder.

The running serve records its link in the data folder, readable by this user only
(:mod:`app.web.running`); this prints it and, where a browser can show up (as serve decides),
opens it. Exit 1 when no serve runs here.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

__all__ = ["run_open"]


def run_open(settings: Any, args: argparse.Namespace) -> int:
    from app.web import display_available, open_in_browser, running_serve

    home = Path(settings.home).expanduser()
    serve = running_serve(home)
    if serve is None:
        print(
            f"mcp-setup: no `mcp-setup serve` runs on this data folder ({home}). Start one with `mcp-setup serve`.",
            file=sys.stderr,
        )
        return 1
    if serve.url is None:
        print(
            f"mcp-setup: `mcp-setup serve` ({serve.words()}) is still starting; try again in a moment.", file=sys.stderr
        )
        return 1
    print(serve.url)
    if not args.no_browser and display_available(os.environ):
        open_in_browser(serve.url)
    return 0
