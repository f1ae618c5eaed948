"""A throwaway PostgreSQL cluster for the bench's team row, started as ``scripts/test.sh`` starts
the tests' one: a temp data dir, its unix socket there and no TCP listener, ``fsync`` off; run as
the ``postgres`` system user when the bench runs as root (initdb refuses root). Stopped and
deleted on leaving the ``with``."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path


def _pg_bin() -> Path:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()],
    )
    if not found:
        raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    return found[-1]


def _as_pg(argv: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


@contextlib.contextmanager
def throwaway_cluster() -> Iterator[str]:
    """The SQLAlchemy URL of a fresh cluster's ``postgres`` database (user ``mcp_setup``)."""
    pg_bin = _pg_bin()
    root = Path(tempfile.mkdtemp(prefix="mcp-setup-bench-pg-"))
    root.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = root / "data"
    try:
        subprocess.run(
            _as_pg(
                [str(pg_bin / "initdb"), "-D", str(data), "-U", "mcp_setup", "-A", "trust", "-E", "UTF8", "--no-sync"]
            ),
            check=True,
            capture_output=True,
        )
        options = f"-p {port} -k {root} -c listen_addresses= -c fsync=off -c max_connections=200"
        subprocess.run(
            _as_pg(
                [
                    str(pg_bin / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(root / "server.log"),
                    "-w",
                    "-t",
                    "60",
                    "-o",
                    options,
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
        )
        yield f"postgresql+psycopg://mcp_setup@/postgres?host={root}&port={port}"
    finally:
        subprocess.run(
            _as_pg([str(pg_bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]), capture_output=True
        )
        shutil.rmtree(root, ignore_errors=True)
