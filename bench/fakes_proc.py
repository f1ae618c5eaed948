"""Both fake registries (tests/fakes) in their own process, with an injected latency.

``python -m bench.fakes_proc LATENCY`` (from the repo root) prints one JSON line ``{"official": URL, "smithery":
URL, "api_key": KEY}`` once both listen, and stops when its stdin closes. Running them in
another process keeps their work off the measuring process's GIL.
"""

import json
import sys

from tests.fakes.official_registry import FakeOfficialRegistry
from tests.fakes.smithery_registry import DEFAULT_API_KEY, FakeSmitheryRegistry


def main() -> None:
    latency = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    with FakeOfficialRegistry() as official, FakeSmitheryRegistry(api_key=DEFAULT_API_KEY) as smithery:
        official.latency = latency
        smithery.latency = latency
        print(json.dumps({"official": official.url, "smithery": smithery.url, "api_key": DEFAULT_API_KEY}), flush=True)
        sys.stdin.read()  # until the parent closes our stdin (or dies)


if __name__ == "__main__":
    main()
