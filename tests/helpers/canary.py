"""Every byte under a folder, to look for a canary in."""

from __future__ import annotations

from pathlib import Path


def all_bytes_under(path: Path) -> list[tuple[Path, bytes]]:
    return [(p, p.read_bytes()) for p in path.rglob("*") if p.is_file()]
