"""The suite's order: the longest test files first, each file's tests together and in their own
order (tests/helpers/slow_first.py), and the record of seconds per file it reads and rewrites."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.mcp_face import REPO
from tests.helpers.slow_first import UNKNOWN_SECONDS_PER_TEST, Recorder, longest_first, recorded
from tests.helpers.timeouts import scaled


def test_files_run_longest_first_with_each_files_tests_together_in_their_own_order() -> None:
    ids = [
        "tests/a/test_quick.py::test_one",
        "tests/b/test_long.py::test_one[sqlite]",
        "tests/a/test_quick.py::test_two",
        "tests/b/test_long.py::test_one[postgresql]",
        "tests/c/test_middle.py::Group::test_one",
    ]
    seconds = {"tests/a/test_quick.py": 0.2, "tests/b/test_long.py": 90.0, "tests/c/test_middle.py": 4.0}
    assert [ids[i] for i in longest_first(ids, seconds)] == [
        "tests/b/test_long.py::test_one[sqlite]",
        "tests/b/test_long.py::test_one[postgresql]",
        "tests/c/test_middle.py::Group::test_one",
        "tests/a/test_quick.py::test_one",
        "tests/a/test_quick.py::test_two",
    ]


def test_a_file_the_record_lacks_weighs_its_number_of_tests_and_ties_keep_the_collections_order() -> None:
    ids = [f"tests/test_new.py::test_{n}" for n in range(4)] + ["tests/test_a.py::t", "tests/test_b.py::t"]
    seconds = {"tests/test_a.py": 1.0, "tests/test_b.py": 1.0, "tests/test_c.py": 50.0}
    assert 4 * UNKNOWN_SECONDS_PER_TEST > 1.0
    order = [ids[i] for i in longest_first(ids, seconds)]
    assert order == [*ids[:4], "tests/test_a.py::t", "tests/test_b.py::t"]
    assert sorted(longest_first(ids, seconds)) == list(range(len(ids)))  # every test, once


def test_a_missing_or_broken_record_orders_by_the_number_of_tests(tmp_path: Path) -> None:
    assert recorded(tmp_path / "none.json") == {}
    (tmp_path / "broken.json").write_text("{not json")
    assert recorded(tmp_path / "broken.json") == {}


def _report(nodeid: str, when: str, seconds: float) -> pytest.TestReport:
    return pytest.TestReport(nodeid, (nodeid, 0, nodeid), {}, "passed", None, when, duration=seconds)  # type: ignore[arg-type]


def test_the_recorder_writes_each_files_seconds_over_the_old_record_and_drops_files_that_are_gone(
    tmp_path: Path,
) -> None:
    for name in ("test_a.py", "test_b.py", "test_kept.py"):
        (tmp_path / "tests" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "tests" / name).write_text("")
    record = tmp_path / "durations.json"
    record.write_text(json.dumps({"tests/test_a.py": 9.0, "tests/test_kept.py": 3.0, "tests/test_gone.py": 7.0}))
    recorder = Recorder(record, tmp_path)
    for when, seconds in (("setup", 0.5), ("call", 1.0), ("teardown", 0.25)):
        recorder.pytest_runtest_logreport(_report("tests/test_a.py::test_x[1]", when, seconds))
    recorder.pytest_runtest_logreport(_report("tests/test_a.py::test_y", "call", 0.25))
    recorder.pytest_runtest_logreport(_report("tests/test_b.py::T::test_z", "call", 12.0))
    recorder.pytest_sessionfinish()
    written = json.loads(record.read_text())
    assert written == {"tests/test_b.py": 12.0, "tests/test_kept.py": 3.0, "tests/test_a.py": 2.0}
    assert list(written) == ["tests/test_b.py", "tests/test_kept.py", "tests/test_a.py"]  # longest first, as read


CRASHING = """
import os
from pathlib import Path


def test_before():
    pass


def test_the_worker_dies():
    with open(Path(__file__).parent / "runs", "a") as runs:
        runs.write("ran\\n")
    os._exit(1)  # what pytest-timeout's thread method does to a stuck test


def test_after():
    pass
"""


def test_a_test_whose_worker_died_is_reported_once_and_not_run_again_and_the_rest_of_its_file_runs(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_crashing.py").write_text(CRASHING)
    (tmp_path / "test_other.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MCP_SETUP_TEST_"))}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.helpers.slow_first", "-n", "2"]
        + ["--dist", "loadscope", "--no-loadscope-reorder", "-rA", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert (tmp_path / "runs").read_text() == "ran\n", done.stdout[-3000:]
    assert done.stdout.count("FAILED test_crashing.py::test_the_worker_dies") == 1, done.stdout[-3000:]
    for test in ("test_crashing.py::test_before", "test_crashing.py::test_after", "test_other.py::test_one"):
        assert f"PASSED {test}" in done.stdout, done.stdout[-3000:]
