"""One way for a test to get a runtime: the ``new_runtime`` fixture.

``new_runtime(settings, **options)`` is ``build_runtime`` for the test: the settings default to
the test's isolated data dir (``Settings()`` reads the ``MCP_SETUP_HOME`` the isolation fixture set),
the keyring to the test's own ``memory_keyring``; any other option (``keyring_backend``, ``which``,
``host_env``, ``refs_timer``, ``http_transport``) is passed through. Every runtime it built and the
test did not close itself is closed at teardown, in the test's event loop, last built first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # imported when a runtime is built: a test that never builds one loads no core
    from app.runtime import Runtime
    from app.settings import Settings

_THE_TESTS_KEYRING = object()


class NewRuntime:
    """Builds runtimes for one test and closes the ones left open."""

    def __init__(self, keyring_backend: Any) -> None:
        self.keyring_backend = keyring_backend
        self.built: list[Runtime] = []

    def __call__(
        self, settings: Settings | None = None, *, keyring_backend: Any = _THE_TESTS_KEYRING, **options: Any
    ) -> Runtime:
        from app.runtime import build_runtime
        from app.settings import Settings

        if keyring_backend is _THE_TESTS_KEYRING:
            keyring_backend = self.keyring_backend
        runtime = build_runtime(
            Settings() if settings is None else settings, keyring_backend=keyring_backend, **options
        )
        self.built.append(runtime)
        return runtime

    async def aclose(self) -> None:
        """Close what the test left open (its HTTP client is the last part a runtime closes)."""
        while self.built:
            runtime = self.built.pop()
            if not runtime.http.is_closed:
                await runtime.aclose()


@pytest.fixture
async def new_runtime(anyio_backend: str, memory_keyring: Any) -> AsyncIterator[NewRuntime]:
    runtimes = NewRuntime(memory_keyring)
    try:
        yield runtimes
    finally:
        await runtimes.aclose()
