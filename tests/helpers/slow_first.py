"""The longest test files start first, so no worker is left alone on a long one at the end.

``scripts/test.sh`` runs the suite with pytest-xdist's ``--dist loadscope`` and
``--no-loadscope-reorder``: a test file (a class, when a file has classes) goes whole to one
worker, so its module-scoped fixtures are set up once, and the files are handed out in the
collection's order to whichever worker is free. This plugin makes that order the longest
first (longest processing time first: the tail is made of short files), from the seconds
each file took in a recorded run, kept in ``tests/durations.json``. Inside a file the order
is pytest's own. A file the record does not know yet (a new one) is placed by its number of
tests, :data:`UNKNOWN_SECONDS_PER_TEST` each.

The record is rewritten from a run of the whole suite (the seconds of every file that ran,
setup and teardown included; files that no longer exist are dropped)::

    MCP_SETUP_TEST_RECORD_DURATIONS=1 ./scripts/test.sh

The order changes only which worker runs a file and when: every test still runs, with its
own state (tests/conftest.py). A test whose worker died (a stuck test past its timeout) is
reported once and not run again (:class:`CrashedTestsRunOnce`), as under ``--dist load``.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "DURATIONS",
    "RECORD_ENV",
    "UNKNOWN_SECONDS_PER_TEST",
    "CrashedTestsRunOnce",
    "Recorder",
    "file_of",
    "longest_first",
    "recorded",
]

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
RECORD_ENV = "MCP_SETUP_TEST_RECORD_DURATIONS"
#: A file the record does not know: this many seconds for each of its tests (most tests take less).
UNKNOWN_SECONDS_PER_TEST = 0.5

#: Read once, at import: the isolation fixture clears every ``MCP_SETUP_*`` variable before each test.
_RECORDING = os.environ.get(RECORD_ENV, "").strip() not in ("", "0")


def file_of(nodeid: str) -> str:
    """The test file of a node id (``tests/x/test_y.py::test_z[a]`` -> ``tests/x/test_y.py``)."""
    return nodeid.split("::", 1)[0]


def recorded(path: Path = DURATIONS) -> dict[str, float]:
    """The record's seconds per test file (empty when there is none)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def longest_first(nodeids: list[str], seconds: dict[str, float]) -> list[int]:
    """The positions of ``nodeids`` in the order to run them: files by their recorded seconds,
    longest first (a file the record lacks: its number of tests times
    :data:`UNKNOWN_SECONDS_PER_TEST`); a file's tests stay together, in their own order; files
    of equal weight keep the collection's order."""
    positions: dict[str, list[int]] = {}
    for index, nodeid in enumerate(nodeids):
        positions.setdefault(file_of(nodeid), []).append(index)

    def weight(name: str) -> float:
        known = seconds.get(name)
        return known if known is not None else len(positions[name]) * UNKNOWN_SECONDS_PER_TEST

    order = sorted(positions, key=lambda name: -weight(name))  # sorted() is stable: ties keep their order
    return [index for name in order for index in positions[name]]


@pytest.hookimpl(trylast=True)  # after any other plugin chose or dropped tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    order = longest_first([item.nodeid for item in items], recorded())
    items[:] = [items[i] for i in order]


class CrashedTestsRunOnce:
    """xdist's ``loadscope`` scheduler, except that a test whose worker died (pytest-timeout ends a
    stuck test with ``os._exit``) is not run again: loadscope puts the file's unfinished tests
    back in the queue, the one that crashed among them, and the next worker meets the same hang,
    up to xdist's limit of restarted workers. Here that test is marked done before the file goes
    back (it is reported as crashed, with its stacks: tests/conftest.py); the others still run.
    Everything else is the wrapped scheduler's."""

    def __init__(self, scheduler: Any) -> None:
        self._scheduler = scheduler

    def __getattr__(self, name: str) -> Any:
        return getattr(self._scheduler, name)

    def remove_node(self, node: Any) -> str | None:
        workload = self._scheduler.assigned_work.get(node, {})
        crashed = next((nodeid for unit in workload.values() for nodeid, done in unit.items() if not done), None)
        if crashed is None:
            return self._scheduler.remove_node(node)  # type: ignore[no-any-return]
        for unit in workload.values():
            if crashed in unit:
                unit[crashed] = True
        self._scheduler.remove_node(node)  # the file's other unfinished tests go back in the queue
        return crashed


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    return CrashedTestsRunOnce(LoadScopeScheduling(config, log))


class Recorder:
    """Sums each file's seconds (every phase of every test) in the process that reports them
    (the controller under xdist, else the one pytest process), and at the end writes them into
    the record at ``path``, over what it held for those files (``root``: where the node ids'
    paths start; a file no longer there leaves the record)."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path = path
        self.root = root
        self.seconds: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[file_of(report.nodeid)] += report.duration

    def pytest_sessionfinish(self) -> None:
        if not self.seconds:
            return
        merged = {k: v for k, v in recorded(self.path).items() if (self.root / k).is_file()}
        merged.update({k: round(v, 1) for k, v in self.seconds.items() if (self.root / k).is_file()})
        ordered = dict(sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])))
        self.path.write_text(json.dumps(ordered, indent=0) + "\n", encoding="utf-8")


def pytest_configure(config: pytest.Config) -> None:
    if _RECORDING and not hasattr(config, "workerinput"):
        config.pluginmanager.register(Recorder(DURATIONS, config.rootpath), "mcp-setup-durations-recorder")
