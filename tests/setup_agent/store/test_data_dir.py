"""The data dir and the dirs of installs and scratch copies are 0700, also when they existed
looser, and a loose home is reported (#24 item 13)."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from app.settings import Settings
from setup_agent.store.data_dir import PRIVATE_SUBDIRS, prepare_data_dir

pytestmark = pytest.mark.anyio


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_dir_and_its_subdirs_are_private(tmp_path: Path) -> None:
    home = tmp_path / "data"
    assert prepare_data_dir(home) == []
    for path in (home, *(home / n for n in PRIVATE_SUBDIRS)):
        assert _mode(path) == 0o700, path


def test_an_existing_loose_home_is_tightened_and_reported(tmp_path: Path) -> None:
    home = tmp_path / "data"
    (home / "servers").mkdir(parents=True)
    os.chmod(home, 0o755)
    os.chmod(home / "servers", 0o777)
    warnings = prepare_data_dir(home)
    assert _mode(home) == 0o700 and _mode(home / "servers") == 0o700
    assert any(f"{home} was readable by other users (mode 0755)" in w for w in warnings)
    assert any("servers was readable" in w and "0777" in w for w in warnings)


async def test_the_runtime_makes_the_home_private_and_logs_that_it_was_loose(
    new_runtime, tmp_path: Path, memory_keyring, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "data"
    home.mkdir(mode=0o755)
    os.chmod(home, 0o755)
    with caplog.at_level(logging.WARNING):
        runtime = new_runtime(
            Settings(home=home, registries="local", catalog_dir=tmp_path / "catalog"), keyring_backend=memory_keyring
        )
    try:
        assert _mode(home) == 0o700
        assert _mode(home / "servers") == 0o700 and _mode(home / "scratch") == 0o700
        assert "was readable by other users (mode 0755)" in caplog.text
    finally:
        await runtime.aclose()
