"""Row 19: what a commit to the SQLite store costs, as shipped against the journal it had before.

One data dir per mode, each a real ``Store.for_data_dir`` (a SQLite file; an in-memory data key). Per
round and mode: ``--servers`` installs (the server, its two encrypted values, its tools, its
audit row, the change counter: one commit each), each server disabled and enabled again (an
audit row and the counter, one commit each) and removed (one commit): four commits per server,
timed together. The modes, interleaved with the order rotated each round:

* ``shipped``: the store as the product opens it (``journal_mode=WAL``, ``synchronous=NORMAL``,
  ``setup_agent/store/engine.py``);
* ``previous``: the store as it was before (SQLite's defaults: a rollback journal deleted at
  each commit, ``synchronous=FULL``), made from the same ``Store`` with its engine's connect hook
  replaced by the previous one (foreign keys only) and the file put back in a rollback journal;
* ``wal_full`` (context): the write-ahead log with a sync at every commit, to show which half of
  the change buys what.

The ratio is shipped ÷ previous, median per round. Context: the file system of the temp root
(a tmpfs would make every sync free and the comparison empty).
"""

from __future__ import annotations

import argparse
import subprocess
import time
from typing import Any

from bench.common import Root, emit, median

MODES = ("shipped", "previous", "wal_full")


def open_store(root: Root, mode: str) -> Any:
    from sqlalchemy import event

    from setup_agent.secrets.vault import Vault
    from setup_agent.store import engine as store_engine
    from setup_agent.store.database import Store

    data = root.path / f"data-{mode}"
    store = Store.for_data_dir(data, Vault.in_memory())
    if mode == "shipped":
        return store
    engine = store.database.engine
    event.remove(engine, "connect", store_engine._sqlite_on_connect)
    event.listen(engine, "connect", _previous_hook if mode == "previous" else _wal_full_hook)
    engine.dispose()  # every connection from here on gets the hook of this mode
    with engine.connect() as conn:  # the file's journal (stored in it), switched while it is the only connection
        conn.exec_driver_sql(f"PRAGMA journal_mode={'DELETE' if mode == 'previous' else 'WAL'}")
    return store


def _previous_hook(dbapi_connection: Any, _record: Any) -> None:
    """The connect hook before the write-ahead log: foreign keys, SQLite's defaults otherwise."""
    dbapi_connection.execute("PRAGMA foreign_keys=ON")


def _wal_full_hook(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.execute("PRAGMA busy_timeout=10000")
    dbapi_connection.execute("PRAGMA journal_mode=WAL")
    dbapi_connection.execute("PRAGMA synchronous=FULL")
    dbapi_connection.execute("PRAGMA foreign_keys=ON")


def pragmas(store: Any) -> dict[str, Any]:
    with store.database.engine.connect() as conn:
        return {
            "journal_mode": conn.exec_driver_sql("PRAGMA journal_mode").scalar(),
            "synchronous": conn.exec_driver_sql("PRAGMA synchronous").scalar(),
        }


def one_round(store: Any, servers: int, tag: str) -> float:
    """Seconds for ``servers`` installs, disables, enables and removals (4 commits per server)."""
    t = time.perf_counter()
    ids = [
        store.servers.install(
            qualified_name=f"io.bench/{tag}-{i}",
            source="local",
            version="1.0.0",
            package_type="stdio",
            launch_spec={"command": "python3", "args": ["server.py"], "env": {"STUB_API_KEY": "${STUB_API_KEY}"}},
            installed_by="bench",
            tools_hash="0" * 64,
            env={"STUB_API_KEY": (f"bench-value-{i}", True), "REGION": ("eu", False)},
            tools=[{"name": "echo", "description": "Echo the given text back."}],
        ).server_id
        for i in range(servers)
    ]
    for sid in ids:
        store.servers.set_enabled(sid, False)
        store.servers.set_enabled(sid, True)
    for sid in ids:
        store.servers.remove(sid)
    return time.perf_counter() - t


def main_run(rounds: int, servers: int) -> dict[str, Any]:
    root = Root("store")
    stores: dict[str, Any] = {}
    try:
        stores = {mode: open_store(root, mode) for mode in MODES}
        settings = {mode: pragmas(s) for mode, s in stores.items()}
        for mode, s in stores.items():  # warm: first statements, page cache
            one_round(s, 2, f"warm-{mode}")
        times: dict[str, list[float]] = {m: [] for m in MODES}
        ratios = []
        for r in range(rounds):
            order = list(MODES[r % len(MODES) :] + MODES[: r % len(MODES)])
            took = {mode: one_round(stores[mode], servers, f"r{r}") for mode in order}
            for mode, seconds in took.items():
                times[mode].append(seconds)
            ratios.append(took["shipped"] / took["previous"])
        for s in stores.values():
            assert s.servers.list() == [] and s.audit.counts()["total"] == (rounds * servers + 2) * 4
        fs = subprocess.run(["stat", "-f", "-c", "%T", str(root.path)], capture_output=True, text=True).stdout.strip()
        commits = servers * 4
        return {
            "section": "store",
            "rounds": rounds,
            "servers": servers,
            "commits_per_round": commits,
            "filesystem": fs,
            "pragmas": settings,
            "per_commit": {
                m: {"median": median(v) / commits, "min": min(v) / commits, "max": max(v) / commits, "n": len(v)}
                for m, v in times.items()
            },
            "ratio": median(ratios),
        }
    finally:
        for s in stores.values():
            s.close()
        root.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--servers", type=int, default=10)
    args = parser.parse_args()
    emit(main_run(args.rounds, args.servers))


if __name__ == "__main__":
    main()
