"""The listening socket ``serve`` and the secret page hand to uvicorn: what asyncio makes of the
connections it accepts."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from app.pages import tcp_listener
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.anyio


async def _nodelay_of_accepted(sock: socket.socket) -> int:
    """``TCP_NODELAY`` of the server side of one connection accepted on ``sock``."""
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accepted(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=sock)
    async with server:
        _reader, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        try:
            return await asyncio.wait_for(seen, scaled(10))
        finally:
            writer.close()


async def test_connections_accepted_on_a_tcp_listener_answer_without_waiting_for_the_delayed_ack() -> None:
    assert await _nodelay_of_accepted(tcp_listener("127.0.0.1", 0, backlog=8)) != 0


async def test_a_listener_made_with_protocol_zero_would_leave_nagle_on() -> None:
    """Why :func:`tcp_listener` names the protocol: without it this test's check above would fail."""
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    plain.bind(("127.0.0.1", 0))
    plain.listen(8)
    plain.setblocking(False)
    assert await _nodelay_of_accepted(plain) == 0


def test_a_port_in_use_is_an_oserror_and_leaves_no_socket_open() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        before = set(os.listdir("/proc/self/fd"))
        with pytest.raises(OSError):
            tcp_listener("127.0.0.1", taken.getsockname()[1], backlog=8)
        assert set(os.listdir("/proc/self/fd")) <= before
