"""Blocking terminal input for the async faces: :func:`input_in_thread` asks in a daemon thread,
never joined, so that Ctrl-C never waits on a question (the terminal's agent run and ``apply``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["input_in_thread"]


def input_in_thread(
    fn: Callable[[], Any], *, name: str, on_eof: Callable[[], BaseException] | None = None
) -> asyncio.Future[Any]:
    """Run blocking terminal input ``fn`` in a daemon thread, never joined (Ctrl-C must not wait
    on it); the returned future gets its value or exception. ``on_eof`` replaces an ``EOFError``."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            future.set_result(value) if ok else future.set_exception(value)

    def work() -> None:
        try:
            value = fn()
        except EOFError as exc:
            loop.call_soon_threadsafe(settle, False, on_eof() if on_eof is not None else exc)
        except BaseException as exc:  # noqa: BLE001 - handed to the loop
            loop.call_soon_threadsafe(settle, False, exc)
        else:
            loop.call_soon_threadsafe(settle, True, value)

    threading.Thread(target=work, name=name, daemon=True).start()
    return future
