"""Shared pytest fixtures for the registry tests (loaded for every test by tests/conftest.py).

The fakes are started once per module and reset (fast, healthy, empty request log) before
each test that uses them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.official_registry import FakeOfficialRegistry
from tests.fakes.smithery_registry import DEFAULT_API_KEY, FakeSmitheryRegistry
from tests.helpers.paths import FIXTURES

__all__ = [
    "OFFICIAL_FIXTURES",
    "SAMPLE_FILES",
    "FakeClock",
    "load_fixture",
    "official_fake",
    "official_server",
    "smithery_fake",
    "smithery_server",
]

OFFICIAL_FIXTURES = FIXTURES / "registry" / "official"
SAMPLE_FILES = ("servers_sample_2025-12-18.json", "seed.json", "seed_2025-09-29.json")


def load_fixture(name: str) -> list[dict[str, Any]]:
    return json.loads((OFFICIAL_FIXTURES / name).read_text(encoding="utf-8"))


class FakeClock:
    """An injectable monotonic timer that only moves when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="module")
def official_server() -> Iterator[FakeOfficialRegistry]:
    with FakeOfficialRegistry() as fake:
        yield fake


@pytest.fixture
def official_fake(official_server: FakeOfficialRegistry) -> Iterator[FakeOfficialRegistry]:
    official_server.reset()
    yield official_server
    official_server.reset()


@pytest.fixture(scope="module")
def smithery_server() -> Iterator[FakeSmitheryRegistry]:
    with FakeSmitheryRegistry(api_key=DEFAULT_API_KEY) as fake:
        yield fake


@pytest.fixture
def smithery_fake(smithery_server: FakeSmitheryRegistry) -> Iterator[FakeSmitheryRegistry]:
    smithery_server.reset()
    yield smithery_server
    smithery_server.reset()
